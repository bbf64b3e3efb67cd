package hostnet

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
)

// The objects every install on a host shares (shared.go): bridge.conf and
// the helper's setuid bit, under installs of several state directories.
// Each case here broke an earlier version (a fresh reviewer's attempts).

func installCIDR(t *testing.T, h *Host, cidr string) error {
	t.Helper()
	ctx := context.Background()
	o, err := h.Inspect(ctx)
	must(t, err)
	p, err := h.PlanInstall(o, Options{CIDR: cidr})
	if err != nil {
		return err
	}
	_, err = h.Apply(ctx, p, Options{CIDR: cidr}, func(s string) { t.Log(s) })
	return err
}

func reasonOf(err error) string {
	if xe := exitcode.As(err); xe != nil {
		return xe.Reason
	}
	return ""
}

// crashIn runs f, which panics with crashed at phase/step through h's
// test seam, as a barn-net killed there.
func crashIn(h *Host, phase, step string, f func()) {
	defer func() { _ = recover() }()
	h.CrashAfter = func(ph, id string) {
		if ph == phase && id == step {
			panic(crashed{ph, id})
		}
	}
	defer func() { h.CrashAfter = nil }()
	f()
}

// Three installs over an admin's own bridge.conf (0600, CRLF, no final
// newline) in a 0700 /etc/qemu: the earlier ones are refused, naming the
// latest, also after an install made after a refusal; in reverse order
// the host ends exactly as before.
func TestLiveThreeInstallsLeaveInReverseOrder(t *testing.T) {
	live(t, func(t *testing.T, e *liveEnv) {
		a := e.host
		ctx := context.Background()
		must(t, os.MkdirAll(a.QemuConfDir(), 0o700))
		must(t, os.WriteFile(a.BridgeConf(), []byte("allow virbr0\r\ndeny br9"), 0o600))
		before := snap(t, a)
		b, c := another(e, "b", "barn1"), another(e, "c", "barn2")
		must(t, installCIDR(t, a, ""))
		must(t, installCIDR(t, &b, "10.10.20.0/24"))
		if _, err := a.Uninstall(ctx, nil); reasonOf(err) != "installed_after" {
			t.Fatalf("a: %v", err)
		}
		must(t, installCIDR(t, &c, "10.10.30.0/24"))
		for _, h := range []*Host{a, &b} {
			if _, err := h.Uninstall(ctx, nil); reasonOf(err) != "installed_after" || !strings.Contains(exitcode.As(err).Next, "BARN_BRIDGE=barn2 ") {
				t.Fatalf("%s: %v", h.Bridge, err)
			}
		}
		for _, h := range []*Host{&c, &b, a} {
			if _, err := h.Uninstall(ctx, nil); err != nil {
				t.Fatalf("uninstall %s: %v", h.Bridge, err)
			}
		}
		sameSnap(t, "three uninstalled", before, snap(t, a))
	})
}

// A later install killed right after it wrote its block (in flight in its
// manifest), then a third install: the hints lead from the earliest to the
// latest, then to the crashed one, and the host ends as before.
func TestLiveCrashedMiddleInstallIsNamed(t *testing.T) {
	live(t, func(t *testing.T, e *liveEnv) {
		a := e.host
		ctx := context.Background()
		before := snap(t, a)
		b, c := another(e, "b", "barn1"), another(e, "c", "barn2")
		must(t, installCIDR(t, a, ""))
		crashIn(&b, "install", "bridge-conf", func() { _ = installCIDR(t, &b, "10.10.20.0/24") })
		must(t, installCIDR(t, &c, "10.10.30.0/24"))
		var followed []string
		for range 3 {
			_, err := a.Uninstall(ctx, nil)
			if err == nil {
				break
			}
			xe := exitcode.As(err)
			if xe == nil || xe.Reason != "installed_after" {
				t.Fatalf("a: %v", err)
			}
			next := map[string]*Host{"barn2": &c, "barn1": &b}[strings.TrimPrefix(strings.Fields(xe.Next)[0], "BARN_BRIDGE=")]
			followed = append(followed, next.Bridge)
			if _, err := next.Uninstall(ctx, nil); err != nil {
				t.Fatalf("following the hint %q: %v", xe.Next, err)
			}
		}
		if strings.Join(followed, ",") != "barn2,barn1" {
			t.Fatalf("hints followed %v, want barn2 then barn1", followed)
		}
		sameSnap(t, "all uninstalled", before, snap(t, a))
	})
}

// A later install's uninstall killed right after it restored bridge.conf
// (its manifest still counts the block), then the earlier one's uninstall:
// the later one, resumed, finds its block gone and leaves the file to the
// earlier one's restore; the host ends as before.
func TestLiveResumedUninstallAfterAnEarlierOne(t *testing.T) {
	live(t, func(t *testing.T, e *liveEnv) {
		a := e.host
		ctx := context.Background()
		b := another(e, "b", "barn1")
		before := snap(t, a)
		must(t, installCIDR(t, a, ""))
		must(t, installCIDR(t, &b, "10.10.20.0/24"))
		crashIn(&b, "uninstall", "bridge-conf", func() { _, _ = b.Uninstall(ctx, nil) })
		if _, err := a.Uninstall(ctx, nil); err != nil {
			t.Fatalf("a's uninstall after b's killed one: %v", err)
		}
		if _, err := b.Uninstall(ctx, nil); err != nil {
			t.Fatalf("b's uninstall resumed: %v", err)
		}
		if _, err := os.Lstat(b.ManifestPath()); !os.IsNotExist(err) || linkNamed(t, a, "barn1") != nil {
			t.Fatalf("b is not uninstalled: manifest %v, barn1 %v", err, linkNamed(t, a, "barn1"))
		}
		sameSnap(t, "both uninstalled", before, snap(t, a))
	})
}

// Another install's block copied into this bridge.conf (by hand, from a
// lab with its own /etc) is not a later install of this file: uninstall
// refuses owned_file_modified, and names no command that would uninstall
// the lab.
func TestLiveCopiedBlockIsAnEdit(t *testing.T) {
	live(t, func(t *testing.T, e *liveEnv) {
		a := e.host
		ctx := context.Background()
		lab := *a
		lab.StateDir, lab.Bridge, lab.EtcDir = filepath.Join(e.dir, "lab-state"), "barnlab", filepath.Join(e.dir, "lab-etc")
		must(t, os.MkdirAll(lab.EtcDir, 0o755))
		lab.Prover = func(context.Context, *Host, *Plan) error { return nil } // the real helper reads the host's bridge.conf, not the lab's
		must(t, installCIDR(t, a, ""))
		must(t, installCIDR(t, &lab, "10.10.30.0/24"))
		labConf, err := os.ReadFile(lab.BridgeConf())
		must(t, err)
		conf, err := os.ReadFile(a.BridgeConf())
		must(t, err)
		must(t, os.WriteFile(a.BridgeConf(), append(conf, labConf...), 0o644))
		_, err = a.Uninstall(ctx, nil)
		if xe := exitcode.As(err); xe == nil || xe.Reason != "owned_file_modified" || strings.Contains(xe.Next, "barnlab") {
			t.Fatalf("a's uninstall with a copied block: %#v", xe)
		}
		must(t, os.WriteFile(a.BridgeConf(), conf, 0o644))
		for _, h := range []*Host{a, &lab} {
			if _, err := h.Uninstall(ctx, nil); err != nil {
				t.Fatalf("uninstall %s: %v", h.Bridge, err)
			}
		}
	})
}

// Blocks that are not exactly what a later install of this file appended
// after this one's content are edits (owned_file_modified), never
// installed_after: no install's manifest backs them.
func TestForgedLaterBlocksAreEdits(t *testing.T) {
	d := t.TempDir()
	h := &Host{EtcDir: filepath.Join(d, "etc"), StateDir: filepath.Join(d, "state"), Bridge: "barn0"}
	must(t, os.MkdirAll(h.QemuConfDir(), 0o755))
	s := Step{Kind: KindWriteFile, Path: h.BridgeConf(), Content: WithBlock("allow virbr0\n", "barn0", h.ManifestPath())}
	other := filepath.Join(d, "b", "network.json")
	B := ManagedBlock("barn1", other)
	for _, c := range []struct{ name, cur string }{
		{"a block whose manifest does not exist", s.Content + B},
		{"a block naming no manifest file", s.Content + ManagedBlock("x", "/nonexistent/network.json")},
		{"a relative manifest", s.Content + ManagedBlock("x", "b/network.json")},
		{"a block naming this install's manifest", s.Content + ManagedBlock("barn1", h.ManifestPath())},
		{"a later block moved to the top", B + s.Content},
		{"a later block between the admin's lines", "allow virbr0\n" + B + ManagedBlock("barn0", h.ManifestPath())},
		{"a CRLF block", s.Content + strings.ReplaceAll(B, "\n", "\r\n")},
		{"a duplicated block", s.Content + B + B},
		{"this install's block edited", strings.Replace(s.Content, "allow barn0", "allow all", 1) + B},
	} {
		must(t, os.WriteFile(h.BridgeConf(), []byte(c.cur), 0o644))
		if _, err := h.fileUndo(s); reasonOf(err) != "owned_file_modified" {
			t.Errorf("%s: %v, want owned_file_modified", c.name, err)
		}
	}
	// this install's block gone (a killed uninstall restored it, then an
	// earlier install's uninstall rewrote the file): nothing left to undo
	must(t, os.WriteFile(h.BridgeConf(), []byte("allow virbr0\n"+B), 0o644))
	if skip, err := h.fileUndo(s); !skip || err != nil {
		t.Errorf("block gone: skip=%v err=%v", skip, err)
	}
}

// QEMU's user reaches the TUN device only through a supplementary group,
// which the readiness proof's QEMU does not have: install refuses before
// it changes anything.
func TestLiveTunThroughASupplementaryGroupIsRefused(t *testing.T) {
	live(t, func(t *testing.T, e *liveEnv) {
		a := e.host
		f, err := os.OpenFile("/etc/group", os.O_APPEND|os.O_WRONLY, 0) // the overlay's
		must(t, err)
		_, err = f.WriteString("tunusers:x:4343:nobody\n")
		must(t, err)
		must(t, f.Close())
		dev := filepath.Join(e.dir, "dev")
		must(t, os.Mkdir(dev, 0o755))
		sh(t, "mount", "-t", "tmpfs", "-o", "mode=0755", "none", dev)
		t.Cleanup(func() { _ = exec.Command("umount", dev).Run() }) // before the work dir goes
		sh(t, "mknod", "-m", "0660", filepath.Join(dev, "tun"), "c", "10", "200")
		sh(t, "chown", "root:4343", filepath.Join(dev, "tun"))
		sh(t, "mount", "--bind", filepath.Join(dev, "tun"), "/dev/net/tun") // this mount namespace only
		t.Cleanup(func() { _ = exec.Command("umount", "/dev/net/tun").Run() })
		before := snap(t, a)
		if err := installCIDR(t, a, ""); reasonOf(err) != FindTunDenied {
			t.Fatalf("install: %v, want %s", err, FindTunDenied)
		}
		sameSnap(t, "refused install", before, snap(t, a))
	})
}

// Two installs on one host (two state directories and bridges, as README's
// two users) share the setuid helper and bridge.conf. Only the first sets the helper's bit; the
// second records no helper step. Uninstalled in the wrong order, the
// first is refused (installed_after), changing nothing, with the command
// that uninstalls the second: its bit never goes while the second's QEMUs
// may need it. In the right order each leaves what it found, and the host
// is as before.
func TestLiveTwoInstallsShareTheHelper(t *testing.T) {
	live(t, func(t *testing.T, e *liveEnv) {
		a := e.host
		ctx := context.Background()
		b := another(e, "b", "barn1")
		before := snap(t, a)
		if _, err := install(t, a); err != nil {
			t.Fatalf("install a: %v", err)
		}
		o, err := b.Inspect(ctx)
		must(t, err)
		p, err := b.PlanInstall(o, Options{CIDR: "10.10.20.0/24"})
		must(t, err)
		if _, err := b.Apply(ctx, p, Options{CIDR: "10.10.20.0/24"}, func(s string) { t.Log(s) }); err != nil {
			t.Fatalf("install b: %v", err)
		}
		for _, s := range p.Steps {
			if s.Kind == KindChmod && s.Path == b.Helper {
				t.Fatalf("the second install has a helper step %+v: the bit was already set", s)
			}
		}
		mid := snap(t, a)
		_, err = a.Uninstall(ctx, nil)
		want := "BARN_BRIDGE=barn1 BARN_NET_STATE=" + b.StateDir + " barn-net uninstall --yes"
		if xe := exitcode.As(err); xe == nil || xe.Class != exitcode.Conflict || xe.Reason != "installed_after" || xe.Next != want ||
			!strings.Contains(xe.Message, "also allows barn1") {
			t.Fatalf("uninstall a before b: want conflict installed_after, next %q; got %#v", want, xe)
		}
		sameSnap(t, "refused uninstall", mid, snap(t, a))
		st, err := a.Status(ctx, "")
		must(t, err)
		if f := findingOf(st.Findings, "installed_after"); f == nil || f.Fix != want || findingOf(st.Findings, "owned_file_modified") != nil {
			t.Fatalf("a's status findings %+v: want installed_after with fix %q, and no owned_file_modified", st.Findings, want)
		}
		if linkNamed(t, a, "barn0") == nil || linkNamed(t, a, "barn1") == nil {
			t.Fatal("a refused uninstall removed a bridge")
		}
		// Another change to the file beside the later block is still the
		// admin's edit: owned_file_modified, as for any owned file.
		conf, err := os.ReadFile(a.BridgeConf())
		must(t, err)
		must(t, os.WriteFile(a.BridgeConf(), append(append([]byte{}, conf...), "allow br7\n"...), 0o644))
		if _, err := a.Uninstall(ctx, nil); exitcode.As(err) == nil || exitcode.As(err).Reason != "owned_file_modified" {
			t.Fatalf("uninstall a after an edit: want owned_file_modified, got %v", err)
		}
		must(t, os.WriteFile(a.BridgeConf(), conf, 0o644))
		if _, err := b.Uninstall(ctx, nil); err != nil {
			t.Fatalf("uninstall b: %v", err)
		}
		if st, _ := StatFile(a.Helper, false); st.Mode != "4755" {
			t.Fatalf("b's uninstall left the helper %s, want a's 4755", st.Mode)
		}
		if _, err := a.Uninstall(ctx, nil); err != nil {
			t.Fatalf("uninstall a: %v", err)
		}
		sameSnap(t, "both uninstalled", before, snap(t, a))
	})
}

// another is a second install on e's host, sharing its bridge.conf and
// helper: its own state directory (state-NAME) and bridge.
func another(e *liveEnv, name, bridge string) Host {
	h := *e.host
	h.StateDir, h.Bridge = filepath.Join(e.dir, "state-"+name), bridge
	return h
}

// As the CLI does: LockNetwork around install and uninstall.
func lockedInstall(t *testing.T, h *Host, cidr string) error {
	t.Helper()
	unlock, err := h.LockNetwork()
	if err != nil {
		return err
	}
	defer unlock()
	return installCIDR(t, h, cidr)
}

func lockedUninstall(t *testing.T, h *Host) error {
	t.Helper()
	unlock, err := h.LockNetwork()
	if err != nil {
		return err
	}
	defer unlock()
	_, err = h.Uninstall(context.Background(), func(s string) { t.Log(s) })
	return err
}

// An install killed right after it wrote its block (in flight), a later
// install on top: the first one's block counts as written, so its
// uninstall is refused until the later one is gone, then removes it; the
// host ends as before.
func TestLiveInFlightBlockUnderALaterInstall(t *testing.T) {
	live(t, func(t *testing.T, e *liveEnv) {
		a := e.host
		must(t, os.MkdirAll(a.QemuConfDir(), 0o755))
		before := snap(t, a)
		b := another(e, "b", "barn1")
		crashIn(a, "install", "bridge-conf", func() { _ = lockedInstall(t, a, "") })
		if err := lockedInstall(t, a, ""); reasonOf(err) != "install_interrupted" {
			t.Fatalf("a's install again: %v", err)
		}
		must(t, lockedInstall(t, &b, "10.10.20.0/24"))
		if err := lockedUninstall(t, a); reasonOf(err) != "installed_after" {
			t.Fatalf("a's uninstall under b: %v, want installed_after", err)
		}
		must(t, lockedUninstall(t, &b))
		must(t, lockedUninstall(t, a))
		sameSnap(t, "both uninstalled", before, snap(t, a))
	})
}

// "Nothing of this install is left" means no line of its block: a
// marker edited, or Barn's allow line kept without its markers, is an
// edit (owned_file_modified), never a skipped undo.
func TestLeftoverBlockLinesAreEdits(t *testing.T) {
	d := t.TempDir()
	h := &Host{EtcDir: filepath.Join(d, "etc"), StateDir: filepath.Join(d, "state"), Bridge: "barn0"}
	must(t, os.MkdirAll(h.QemuConfDir(), 0o755))
	prev := "allow virbr0\n"
	s := Step{Kind: KindWriteFile, Path: h.BridgeConf(), Content: WithBlock(prev, "barn0", h.ManifestPath()),
		Prev: &FileState{Exists: true, SHA256: digest([]byte(prev)), Content: prev, Mode: "0644"}}
	for _, cur := range []string{
		strings.Replace(s.Content, BlockBegin("barn0"), BlockBegin("barn0")+" (kept)", 1),
		"allow virbr0\nallow barn0\n",
	} {
		must(t, os.WriteFile(h.BridgeConf(), []byte(cur), 0o644))
		if skip, err := h.fileUndo(s); skip || reasonOf(err) != "owned_file_modified" {
			t.Errorf("%q: skip=%v err=%v, want owned_file_modified", cur, skip, err)
		}
	}
}

// Two state directories, each with its own relative BARN_NET_ETC read in
// its own working directory, have two bridge.conf files: their shared
// locks are two (FromEnv makes the paths absolute).
func TestRelativeEtcDirsDoNotContend(t *testing.T) {
	d := t.TempDir()
	run := filepath.Join(d, "run")
	t.Chdir(d)
	var hs []*Host
	for _, n := range []string{"one", "two"} {
		must(t, os.MkdirAll(filepath.Join(d, n, "etc"), 0o755))
		t.Chdir(filepath.Join(d, n))
		hs = append(hs, FromEnv(func(k string) string {
			return map[string]string{"BARN_NET_ETC": "etc", "BARN_NET_STATE": "state", "BARN_NET_RUN": run}[k]
		}))
	}
	if hs[0].SharedLockPath() == hs[1].SharedLockPath() || !filepath.IsAbs(hs[0].StateDir) || !filepath.IsAbs(hs[0].BridgeConf()) {
		t.Fatalf("one lock for two bridge.conf files: %s, %s (state %s)", hs[0].BridgeConf(), hs[1].BridgeConf(), hs[0].StateDir)
	}
}

// An install's rollback killed after it restored the helper and
// bridge.conf (its manifest still "installing"), then another install,
// which sets the bit again itself, then the first one's uninstall: the
// bit the other install needs is kept (shared_in_use, a kept note), and
// the other's uninstall restores it; the host ends as before.
func TestLiveKilledRollbackKeepsTheOthersBit(t *testing.T) {
	live(t, func(t *testing.T, e *liveEnv) {
		a := e.host
		must(t, os.MkdirAll(a.QemuConfDir(), 0o755))
		before := snap(t, a)
		b := another(e, "b", "barn1")
		a.Prover = func(context.Context, *Host, *Plan) error { return errors.New("injected proof failure") }
		crashIn(a, "uninstall", "bridge-conf", func() { _ = lockedInstall(t, a, "") })
		a.Prover = nil
		must(t, lockedInstall(t, &b, "10.10.20.0/24"))
		p, err := a.Uninstall(context.Background(), nil)
		if err != nil {
			t.Fatalf("a's uninstall: %v", err)
		}
		if st, _ := StatFile(a.Helper, false); st.Mode != "4755" || !slices.ContainsFunc(p.Notes, func(n string) bool { return strings.Contains(n, "kept: "+a.Helper+" stays mode 4755") }) {
			t.Fatalf("a's uninstall: helper %s, notes %q; want the bit kept for barn1, with a kept note", st.Mode, p.Notes)
		}
		must(t, lockedUninstall(t, &b))
		sameSnap(t, "both uninstalled", before, snap(t, a))
	})
}

// The same for /etc/qemu's search bit: an install killed right after it
// made a 0700 /etc/qemu searchable, another install (which finds it so),
// then the first one's uninstall: the mode stays, and the other's
// unprivileged QEMU still attaches.
func TestLiveKilledInstallKeepsTheOthersQemuDirMode(t *testing.T) {
	live(t, func(t *testing.T, e *liveEnv) {
		a := e.host
		must(t, os.MkdirAll(a.QemuConfDir(), 0o700))
		must(t, os.Chmod(a.QemuConfDir(), 0o700))
		b := another(e, "b", "barn1")
		crashIn(a, "install", "qemu-dir-mode", func() { _ = lockedInstall(t, a, "") })
		must(t, lockedInstall(t, &b, "10.10.20.0/24"))
		must(t, lockedUninstall(t, a))
		b.AttachUID, b.AttachGID = 65534, 65534
		if err := ProveAttach(context.Background(), &b, &Plan{Bridge: "barn1"}); err != nil {
			t.Fatalf("b's QEMU after a's uninstall: %v", err)
		}
		must(t, lockedUninstall(t, &b))
	})
}
