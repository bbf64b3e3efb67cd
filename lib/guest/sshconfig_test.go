package guest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/sshkeys"
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
