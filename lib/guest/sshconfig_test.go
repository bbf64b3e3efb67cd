package guest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/sshkeys"
	"barn.dev/lib/testexec"
)

func entries(port int, user string, keys sshkeys.KeyPair) []HostEntry {
	return []HostEntry{{Node: "meta", Aliases: []string{"pg-meta"}, Address: "10.10.10.10", Port: port, User: user,
		IdentityFile: keys.PrivatePath, KnownHosts: keys.KnownHosts, HostKeyAlias: sshkeys.HostKeyAlias(uuidA)}}
}

func fragment(t *testing.T, e []HostEntry) []byte {
	t.Helper()
	f, err := RenderFragment(e)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestInstallInsertsAtTopAndIsIdempotent(t *testing.T) {
	home := t.TempDir()
	p := Paths(home, "")
	_ = os.MkdirAll(p.Dir, 0o700)
	orig := "# mine\nServerAliveInterval 30\n\nHost work\n  User me\n"
	if err := os.WriteFile(p.Config, []byte(orig), 0o640); err != nil {
		t.Fatal(err)
	}
	frag := fragment(t, entries(2222, "dba", sshkeys.Paths("/k")))
	res, err := Install(p, frag)
	if err != nil || res.FragmentChange != "created" || res.IncludeChange != "inserted" {
		t.Fatalf("%+v %v", res, err)
	}
	got, _ := os.ReadFile(p.Config)
	want := "# barn:include\nInclude " + p.Fragment + "\n\n# mine\nServerAliveInterval 30\n\nHost work\n  User me\n"
	if string(got) != want {
		t.Fatalf("config =\n%s\nwant\n%s", got, want)
	}
	if fi, _ := os.Stat(p.Config); fi.Mode().Perm() != 0o640 {
		t.Errorf("config mode changed to %v", fi.Mode().Perm())
	}
	if fi, _ := os.Stat(p.Fragment); fi.Mode().Perm() != 0o600 {
		t.Errorf("fragment mode %v", fi.Mode().Perm())
	}
	res, err = Install(p, frag)
	if err != nil || res.FragmentChange != "unchanged" || res.IncludeChange != "present" {
		t.Fatalf("second install: %+v %v", res, err)
	}
	again, _ := os.ReadFile(p.Config)
	if string(again) != want {
		t.Fatal("second install changed the config")
	}
	rr, err := Remove(p)
	if err != nil || !rr.IncludeRemoved || !rr.FragmentRemoved {
		t.Fatalf("remove: %+v %v", rr, err)
	}
	back, _ := os.ReadFile(p.Config)
	if string(back) != orig {
		t.Fatalf("after remove:\n%q\nwant\n%q", back, orig)
	}
}

func TestInstallCreatesConfig(t *testing.T) {
	p := Paths(t.TempDir(), "")
	if _, err := Install(p, fragment(t, nil)); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(p.Config)
	if string(got) != "# barn:include\nInclude "+p.Fragment+"\n" {
		t.Fatalf("config = %q", got)
	}
	if fi, _ := os.Stat(p.Dir); fi.Mode().Perm() != 0o700 {
		t.Errorf(".ssh mode %v", fi.Mode().Perm())
	}
}

// What Install created (~/.ssh and ~/.ssh/config) is recorded in the
// fragment, survives a re-install, and Remove takes it away again: the
// home directory is as before. What the user added since is kept.
func TestRemoveLeavesHomeAsBefore(t *testing.T) {
	home := t.TempDir()
	p := Paths(home, "")
	res, err := Install(p, fragmentOf(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(res.Created, " ") != p.Dir+" "+p.Config {
		t.Fatalf("created %v", res.Created)
	}
	again, err := Install(p, fragmentOf(t, entries(2222, "dba", sshkeys.Paths("/k"))))
	if err != nil || strings.Join(again.Created, " ") != p.Dir+" "+p.Config {
		t.Fatalf("re-install: created %v, %v", again.Created, err)
	}
	frag, _ := os.ReadFile(p.Fragment)
	if !strings.HasPrefix(string(frag), FragmentBegin+"\n"+CreatedMarker+p.Dir+"\n"+CreatedMarker+p.Config+"\n") {
		t.Fatalf("fragment does not record what was created:\n%s", frag)
	}
	rm, err := Remove(p)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rm.CreatedRemoved, " ") != p.Config+" "+p.Dir {
		t.Fatalf("removed %v, kept %v", rm.CreatedRemoved, rm.CreatedKept)
	}
	if ents, _ := os.ReadDir(home); len(ents) != 0 {
		t.Fatalf("home keeps %v", ents)
	}

	// a config the user wrote into meanwhile, and a key in ~/.ssh, stay
	if _, err := Install(p, fragmentOf(t, nil)); err != nil {
		t.Fatal(err)
	}
	cfg, _ := os.ReadFile(p.Config)
	must(t, os.WriteFile(p.Config, append(cfg, "Host mine\n"...), 0o600))
	must(t, os.WriteFile(filepath.Join(p.Dir, "id_mine"), []byte("k"), 0o600))
	rm, err = Remove(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(rm.CreatedRemoved) != 0 || strings.Join(rm.CreatedKept, " ") != p.Config+" "+p.Dir {
		t.Fatalf("removed %v, kept %v", rm.CreatedRemoved, rm.CreatedKept)
	}
	if b, _ := os.ReadFile(p.Config); string(b) != "Host mine\n" {
		t.Fatalf("config = %q", b)
	}
}

// An existing ~/.ssh and config are not Barn's: nothing is recorded, and
// an emptied config stays.
func TestRemoveKeepsWhatExisted(t *testing.T) {
	p := Paths(t.TempDir(), "")
	must(t, os.MkdirAll(p.Dir, 0o700))
	must(t, os.WriteFile(p.Config, nil, 0o600))
	res, err := Install(p, fragmentOf(t, nil))
	if err != nil || len(res.Created) != 0 {
		t.Fatalf("created %v, %v", res.Created, err)
	}
	if _, err := Remove(p); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(p.Config); err != nil || len(b) != 0 {
		t.Fatalf("config %q, %v", b, err)
	}
}

func TestInstallNeverEditsLinkedConfig(t *testing.T) {
	for _, kind := range []string{"symlink", "hardlink"} {
		t.Run(kind, func(t *testing.T) {
			home := t.TempDir()
			p := Paths(home, "")
			_ = os.MkdirAll(p.Dir, 0o700)
			real := filepath.Join(home, "dotfiles-config")
			if err := os.WriteFile(real, []byte("Host x\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if kind == "symlink" {
				_ = os.Symlink(real, p.Config)
			} else {
				_ = os.Link(real, p.Config)
			}
			_, err := Install(p, fragment(t, nil))
			e := exitcode.As(err)
			if e == nil || e.Class != exitcode.Conflict || e.Reason != "ssh_config_linked" || !strings.Contains(e.Message, "Include "+p.Fragment) {
				t.Fatalf("err = %v", err)
			}
			if b, _ := os.ReadFile(real); string(b) != "Host x\n" {
				t.Fatal("linked config was edited")
			}
			if _, err := os.Stat(p.Fragment); err != nil {
				t.Error("fragment was not published")
			}
		})
	}
}

func TestInstallRefusesUnmarked(t *testing.T) {
	p := Paths(t.TempDir(), "")
	_ = os.MkdirAll(p.Dir, 0o700)
	_ = os.WriteFile(p.Fragment, []byte("Host hand-written\n"), 0o600)
	if e := exitcode.As(func() error { _, err := Install(p, fragment(t, nil)); return err }()); e == nil || e.Reason != "ssh_config_unmarked" {
		t.Fatalf("unmarked fragment: %v", e)
	}
	if b, _ := os.ReadFile(p.Fragment); string(b) != "Host hand-written\n" {
		t.Fatal("unmarked fragment overwritten")
	}
	_ = os.Remove(p.Fragment)
	_ = os.WriteFile(p.Config, []byte("Include ~/.ssh/barn_config\n"), 0o600)
	if e := exitcode.As(func() error { _, err := Install(p, fragment(t, nil)); return err }()); e == nil || e.Reason != "ssh_config_unmarked" {
		t.Fatalf("unmarked include: %v", e)
	}
}

// TestInstalledConfigWorksWithRealSSH: after Install, plain `ssh meta`
// (and the alias) through ~/.ssh/config reaches the server.
func TestInstalledConfigWorksWithRealSSH(t *testing.T) {
	s := startSSHD(t)
	home := t.TempDir()
	p := Paths(home, "")
	if _, err := Install(p, fragment(t, entries(s.port, s.user, s.keys))); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ssh", "-G", "-F", p.Config, "pg-meta").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"hostname 127.0.0.1\n", "user " + s.user + "\n", "hostkeyalias " + sshkeys.HostKeyAlias(uuidA) + "\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("ssh -G lacks %q", want)
		}
	}
	code, o, errs := run(t, []string{"ssh", "-F", p.Config, "-o", "BatchMode=yes", "meta", "echo", "hello"})
	if code != 0 || strings.TrimSpace(o) != "hello" {
		t.Fatalf("ssh -F config meta: %d %q %s", code, o, errs)
	}
}

// fragmentOf is RenderFragment(es), which must succeed.
func fragmentOf(t *testing.T, es []HostEntry) []byte {
	t.Helper()
	f, err := RenderFragment(es)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Remove deletes only a fragment exactly as Barn sealed it. A region it
// cannot prove it wrote (a begin marker without an end, the user's edits
// between the markers, a stripped end marker) is refused before anything
// changes: the fragment and the Include in ~/.ssh/config stay byte for
// byte, and Install refuses it too. A fragment with a bare end marker
// (only development builds wrote one) is refused by both as integrity (7),
// naming the file.
func TestRemoveDeletesOnlyWhatBarnSealed(t *testing.T) {
	p := Paths(t.TempDir(), "")
	must(t, os.MkdirAll(p.Dir, 0o700))
	frag := fragmentOf(t, entries(2222, "dba", sshkeys.Paths("/k")))
	if _, err := Install(p, frag); err != nil {
		t.Fatal(err)
	}
	sealedBytes, _ := os.ReadFile(p.Fragment)
	config, _ := os.ReadFile(p.Config)
	body, end, _ := strings.Cut(string(sealedBytes), "\n"+FragmentEnd)
	body += "\n"
	for _, tc := range []struct {
		name, fragment, reason string
		class                  exitcode.Class
	}{
		{"begin marker only", FragmentBegin + "\n# my own notes\nHost mybox\n  HostName 192.168.1.5\n", "ssh_config_unmarked", exitcode.Conflict},
		{"edited between the markers", strings.Replace(string(sealedBytes), "Host meta pg-meta\n", "Host meta pg-meta\n  ForwardAgent yes\n", 1), "ssh_config_edited", exitcode.Conflict},
		{"a Host block appended inside", body + "Host mine\n  HostName 192.168.1.6\n" + FragmentEnd + end, "ssh_config_edited", exitcode.Conflict},
		{"end marker stripped", body, "ssh_config_unmarked", exitcode.Conflict},
		{"end marker on another line", body + FragmentEnd + end + "Host after\n", "ssh_config_unmarked", exitcode.Conflict},
		{"unsealed (a development build's)", body + FragmentEnd + "\n", "dev_build_format", exitcode.Integrity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			must(t, os.WriteFile(p.Fragment, []byte(tc.fragment), 0o600))
			must(t, os.WriteFile(p.Config, config, 0o600))
			_, err := Remove(p)
			if e := exitcode.As(err); err == nil || e.Class != tc.class || e.Reason != tc.reason || !strings.Contains(e.Message, p.Fragment) {
				t.Fatalf("Remove = %v, want %s %s", err, tc.class, tc.reason)
			}
			if b, _ := os.ReadFile(p.Fragment); string(b) != tc.fragment {
				t.Fatalf("fragment changed by a refused Remove:\n%s", b)
			}
			if b, _ := os.ReadFile(p.Config); string(b) != string(config) {
				t.Fatalf("config changed by a refused Remove:\n%s", b)
			}
			_, err = Install(p, frag)
			if e := exitcode.As(err); err == nil || e.Class != tc.class || e.Reason != tc.reason {
				t.Fatalf("Install over it: %v, want %s %s", err, tc.class, tc.reason)
			}
			if b, _ := os.ReadFile(p.Fragment); string(b) != tc.fragment {
				t.Fatalf("fragment changed by a refused Install:\n%s", b)
			}
		})
	}
	// the sealed fragment itself goes, with the Include
	must(t, os.WriteFile(p.Fragment, sealedBytes, 0o600))
	must(t, os.WriteFile(p.Config, config, 0o600))
	if res, err := Remove(p); err != nil || !res.FragmentRemoved || !res.IncludeRemoved {
		t.Fatalf("Remove of the sealed fragment: %+v %v", res, err)
	}
}

// TestFragmentCheckedByTheLocalSSH: the fragment Barn renders parses with
// the real OpenSSH here, and an ssh that refuses a keyword (as OpenSSH
// before 8.7 refuses SessionType: a fake standing in for it) makes the
// check a capability error carrying ssh's message, so Install never runs.
func TestFragmentCheckedByTheLocalSSH(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("no ssh client: ", err)
	}
	frag, err := RenderFragment([]HostEntry{{Node: "pg-meta-1", Aliases: []string{"pg-meta-1.lab"}, Port: 2222, User: "dba",
		IdentityFile: "/tmp/k", KnownHosts: "/tmp/kh", HostKeyAlias: "barn-x"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckFragmentParses(context.Background(), "", frag); err != nil {
		t.Fatalf("the real ssh refuses Barn's fragment: %v", err)
	}
	old := filepath.Join(t.TempDir(), "ssh")
	script := "#!/bin/sh\nif grep -q SessionType \"$3\"; then echo \"$3: line 9: Bad configuration option: sessiontype\" >&2; exit 255; fi\n"
	if err := testexec.WriteScript(old, []byte(script)); err != nil {
		t.Fatal(err)
	}
	err = CheckFragmentParses(context.Background(), old, frag)
	if e := exitcode.As(err); e == nil || e.Class != exitcode.Capability || e.Reason != "ssh_config_unsupported" || !strings.Contains(e.Message, "Bad configuration option: sessiontype") {
		t.Fatalf("an older ssh: %v, want capability ssh_config_unsupported with ssh's message", err)
	}
	if err := CheckFragmentParses(context.Background(), filepath.Join(t.TempDir(), "absent-ssh"), frag); err != nil {
		t.Fatalf("no ssh client: %v, want nil", err)
	}
}

// TestRefreshRewritesOnlyASealedFragment: nothing installed is left alone;
// a sealed fragment is rewritten keeping what Install recorded creating
// (so Remove still leaves ~/.ssh as it was), and never the config; an
// edited one is refused and kept byte for byte.
func TestRefreshRewritesOnlyASealedFragment(t *testing.T) {
	p := Paths(t.TempDir(), "")
	old := fragment(t, entries(2222, "dba", sshkeys.Paths("/k")))
	moved := fragment(t, entries(2300, "dba", sshkeys.Paths("/k")))
	if got, err := Refresh(p, moved); err != nil || got != "absent" {
		t.Fatalf("nothing installed: %q %v", got, err)
	}
	if _, err := os.Stat(p.Fragment); !os.IsNotExist(err) {
		t.Fatalf("Refresh installed a fragment: %v", err)
	}
	if _, err := Install(p, old); err != nil {
		t.Fatal(err)
	}
	cfg, _ := os.ReadFile(p.Config)
	if got, err := Refresh(p, moved); err != nil || got != "updated" {
		t.Fatalf("sealed: %q %v", got, err)
	}
	b, _ := os.ReadFile(p.Fragment)
	if !strings.Contains(string(b), "Port 2300") || fragmentProof(b) != sealed || !slices.Contains(recordedCreated(b), p.Config) {
		t.Fatalf("refreshed fragment:\n%s", b)
	}
	if now, _ := os.ReadFile(p.Config); string(now) != string(cfg) {
		t.Fatal("Refresh changed ~/.ssh/config")
	}
	if got, err := Refresh(p, moved); err != nil || got != "unchanged" {
		t.Fatalf("again: %q %v", got, err)
	}
	edited := []byte(strings.Replace(string(b), "Port 2300", "Port 2301", 1))
	_ = os.WriteFile(p.Fragment, edited, 0o600)
	if _, err := Refresh(p, old); exitcode.As(err).Reason != "ssh_config_edited" {
		t.Fatalf("edited: %v", err)
	}
	if now, _ := os.ReadFile(p.Fragment); string(now) != string(edited) {
		t.Fatal("an edited fragment was rewritten")
	}
	if rr, err := Remove(p); err == nil {
		t.Fatalf("Remove of an edited fragment: %+v", rr)
	}
}
