package testscripts

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"barn.dev/lib/scripttest"
	"barn.dev/lib/testexec"
)

// TestUninstall runs testdata/uninstall: a realistic install of every
// piece Barn can put on a machine — the host network (barn-net install, for
// real, in a network namespace the setup creates), an image repository
// built by scripts/build-image.sh (with a stand-in for its debootstrap
// image), a pulled image, nodes on the real QEMU attached to the bridge,
// the ssh-config and hosts integrations — then `make uninstall PURGE=1
// IMAGES=1 FORCE=1`, and proves with `machine save/same` that everything
// Barn can touch is exactly as before.
//
// Host-global paths are confined the way the lab suite confines them:
// bridge.conf and the hosts file are the namespace's own (/etc/netns/$NS,
// bind-mounted by ip netns exec), HOME, BARN_NET_STATE, XDG_RUNTIME_DIR
// and BARN_IMAGE_CACHE are under $WORK. The bridge helper is the script's
// own copy (labNamespace): install sets its setuid bit and uninstall
// restores it, in the snapshot; the host's helper is never touched.
func TestUninstall(t *testing.T) {
	if testing.Short() {
		t.Skip("the uninstall suite starts real QEMUs and runs make uninstall: not in -short runs (make test runs it)")
	}
	if reason := uninstallUnavailable(); reason != "" {
		t.Skipf("uninstall suite not run: %s", reason)
	}
	top, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	p := params("testdata/uninstall")
	setup := p.Setup
	p.Setup = func(env *testscript.Env) error {
		if err := setup(env); err != nil {
			return err
		}
		ns, err := labNamespace(env, "barn-uninst-", "HOME", "XDG_RUNTIME_DIR")
		if err != nil {
			return err
		}
		// The namespace name demo.sh down is run with (never created as a
		// namespace); its /etc/netns directory is the script's own.
		env.Setenv("DEMO_NS", ns+"d")
		env.Defer(func() { _ = os.RemoveAll(filepath.Join("/etc/netns", ns+"d")) })
		// The namespace's own hosts file, as a person (or the demo) makes it.
		hosts, err := os.ReadFile("/etc/hosts")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join("/etc/netns", ns, "hosts"), hosts, 0o644); err != nil {
			return err
		}
		w := env.WorkDir
		home := w + "/home"
		xdg := w + "/xdg"
		for _, d := range []string{home, xdg, w + "/cache"} { // cache: as ~/.cache exists before make image
			if err := os.Mkdir(d, 0o700); err != nil {
				return err
			}
		}
		env.Setenv("TOP", top)
		env.Setenv("HOME", home)
		env.Setenv("BARN_HOME", "") // the default: $HOME/.barn
		env.Setenv("XDG_RUNTIME_DIR", xdg)
		env.Setenv("BARN_NET_STATE", w+"/var/lib/barn")
		env.Setenv("BARN_IMAGE_CACHE", w+"/cache/barn/images")
		env.Setenv("BARN_ACCEL", "tcg")
		env.Setenv("BARN_STOP_TIMEOUT", "2s") // no guest answers the powerdown
		env.Setenv("BARN_REPO", "")
		// make uninstall builds the tools: with HOME moved, the go command
		// keeps this machine's module and build caches (the namespace has
		// no network) and its own toolchain.
		env.Setenv("PATH", filepath.Dir(goBinary())+":"+env.Getenv("PATH"))
		goenv, err := exec.Command(goBinary(), "env", "GOENV", "GOPATH", "GOMODCACHE", "GOCACHE").Output()
		if err != nil {
			return fmt.Errorf("go env: %v", err)
		}
		for i, k := range []string{"GOENV", "GOPATH", "GOMODCACHE", "GOCACHE"} {
			env.Setenv(k, strings.Split(string(goenv), "\n")[i])
		}
		env.Setenv("GOTOOLCHAIN", "local")
		env.Setenv("GOPROXY", "off")
		// the go command's telemetry counters go to the user config
		// directory: keep them out of the snapshot's HOME
		env.Setenv("XDG_CONFIG_HOME", w+"/go-config")
		return nil
	}
	p.Cmds["inns"] = cmdInNamespace
	p.Cmds["noqemu"] = cmdNoQEMU
	p.Cmds["machine"] = cmdMachine
	p.Cmds["setenvfile"] = cmdSetenvFile
	scripttest.Run(t, p)
}

func uninstallUnavailable() string {
	switch {
	case os.Geteuid() != 0:
		return "needs root for a network namespace and a root-owned bridge helper"
	case goBinary() == "":
		return "the go command is not on PATH (make uninstall builds the tools)"
	}
	for _, c := range []string{"qemu-system-x86_64", "qemu-img", "ip", "make"} {
		if _, err := exec.LookPath(c); err != nil {
			return c + " is not installed"
		}
	}
	return ""
}

func goBinary() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if p := filepath.Join(os.Getenv("GOROOT"), "bin", "go"); os.Getenv("GOROOT") != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// cmdSetenvFile is `setenvfile VAR FILE`: set $VAR to FILE's content
// without its final newline (a path a script printed).
func cmdSetenvFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: setenvfile VAR FILE")
	}
	ts.Setenv(args[0], strings.TrimRight(ts.ReadFile(args[1]), "\n"))
}

// cmdMachine is `machine save NAME` and `machine same NAME`: record, or
// compare with a record, the state of everything Barn can touch for this
// script (machineState); `same` fails with the lines that differ.
func cmdMachine(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 || args[0] != "save" && args[0] != "same" || neg && args[0] == "save" {
		ts.Fatalf("usage: machine save|same NAME")
	}
	now := machineState(ts)
	rec := ts.MkAbs(".machine-" + args[1])
	if args[0] == "save" {
		ts.Check(os.WriteFile(rec, []byte(strings.Join(now, "\n")+"\n"), 0o600))
		return
	}
	b, err := os.ReadFile(rec)
	ts.Check(err)
	before := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	diff := lineDiff(before, now)
	if neg == (len(diff) > 0) {
		return
	}
	if neg {
		ts.Fatalf("the machine is the same as at %s, but should differ", args[1])
	}
	ts.Fatalf("the machine differs from %s:\n%s", args[1], strings.Join(diff, "\n"))
}

// machineState lists, one line each: every file, directory and symlink
// (type, mode with setuid/setgid/sticky, owner, size, sha256 or link
// target) under the script's HOME, BARN_NET_STATE's and BARN_IMAGE_CACHE's
// top directories under $WORK, XDG_RUNTIME_DIR, /etc/netns/$NS, the host's
// /etc/qemu and /etc/hosts, and the script's bridge helper; the links and addresses
// in $NS; and whether the demo's namespace exists. Paths are shown with
// $WORK and $NS for readable diffs.
func machineState(ts *testscript.TestScript) []string {
	w, ns := ts.Getenv("WORK"), ts.Getenv("NS")
	roots := []string{ts.Getenv("HOME"), w + "/var", w + "/cache", ts.Getenv("XDG_RUNTIME_DIR"),
		filepath.Join("/etc/netns", ns), "/etc/qemu", "/etc/hosts", ts.Getenv("BARN_NET_HELPER")}
	var out []string
	for _, root := range roots {
		if _, err := os.Lstat(root); os.IsNotExist(err) {
			out = append(out, "absent "+root)
			continue
		}
		ts.Check(filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			out = append(out, fileLine(p))
			return nil
		}))
	}
	for _, args := range [][]string{{"-n", ns, "-o", "link", "show"}, {"-n", ns, "-o", "addr", "show"}} {
		b, err := exec.Command("ip", args...).Output()
		ts.Check(err)
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			f := strings.Fields(l)
			if len(f) > 3 {
				out = append(out, "ip "+args[2]+": "+strings.Join(f[1:4], " ")) // index, name, flags or family/address
			}
		}
	}
	b, _ := exec.Command("ip", "netns", "list").Output()
	demo := "absent"
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "barn-demo" {
			demo = "present"
		}
	}
	out = append(out, "netns barn-demo "+demo)
	for i, l := range out {
		out[i] = strings.ReplaceAll(strings.ReplaceAll(l, w, "$WORK"), ns, "$NS")
	}
	return out
}

func fileLine(p string) string {
	fi, err := os.Lstat(p)
	if err != nil {
		return "unreadable " + p + ": " + err.Error()
	}
	uid, gid := -1, -1
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		uid, gid = int(st.Uid), int(st.Gid)
	}
	mode := fi.Mode().Perm() | fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)
	kind, what := "file", ""
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		kind = "link"
		what, _ = os.Readlink(p)
	case fi.IsDir():
		kind = "dir"
	case fi.Mode().IsRegular():
		if b, err := os.ReadFile(p); err == nil {
			sum := sha256.Sum256(b)
			what = fmt.Sprintf("%d bytes sha256:%s", len(b), hex.EncodeToString(sum[:8]))
		}
	default:
		kind = fi.Mode().Type().String()
	}
	return fmt.Sprintf("%s %s %v %d:%d %s", kind, p, mode, uid, gid, what)
}

// lineDiff returns "- line" for lines only in a and "+ line" for lines
// only in b, sorted.
func lineDiff(a, b []string) []string {
	in := func(s []string) map[string]bool {
		m := map[string]bool{}
		for _, l := range s {
			m[l] = true
		}
		return m
	}
	ina, inb := in(a), in(b)
	var d []string
	for _, l := range a {
		if !inb[l] {
			d = append(d, "- "+l)
		}
	}
	for _, l := range b {
		if !ina[l] {
			d = append(d, "+ "+l)
		}
	}
	sort.Strings(d)
	return d
}

// TestUninstallRunsEveryStep runs scripts/uninstall.sh against stand-in
// tools where the ssh-config and the hosts steps fail (as a symlinked
// ~/.ssh/config once made --remove fail): every later step still runs,
// each outcome is listed, and the exit status is 1 naming the failed
// steps. TestUninstall runs the same script against the real tools.
func TestUninstallRunsEveryStep(t *testing.T) {
	top, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	for _, d := range []string{filepath.Join(dir, "scripts"), filepath.Join(dir, "bin"), filepath.Join(home, ".barn", "nodes")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script, err := os.ReadFile(filepath.Join(top, "scripts", "uninstall.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if err := testexec.WriteScript(filepath.Join(dir, "scripts", "uninstall.sh"), script); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "calls")
	stub := func(name, body string) {
		text := "#!/bin/sh\necho \"" + name + " $*\" >> " + log + "\n" + body + "\n"
		if err := testexec.WriteScript(filepath.Join(dir, "bin", name), []byte(text)); err != nil {
			t.Fatal(err)
		}
	}
	stub("barn-state", "echo "+filepath.Join(home, ".barn"))
	stub("barn-node", `case "$1" in ssh-config) echo "barn-node: error: ssh-config failed" >&2; exit 4;; esac`)
	stub("barn-net", `case "$1" in hosts) exit 7;; esac`)
	stub("sudo", `exec "$@"`)
	cmd := exec.Command("bash", filepath.Join(dir, "scripts", "uninstall.sh"), "--yes", "--purge")
	cmd.Env = append(os.Environ(), "HOME="+home, "PATH="+filepath.Join(dir, "bin")+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("uninstall.sh: %v, want exit status 1\n%s", err, out)
	}
	calls, _ := os.ReadFile(log)
	for _, want := range []string{"barn-node destroy", "barn-node ssh-config --remove", "barn-net hosts uninstall", "barn-net uninstall", "barn-node purge"} {
		if !strings.Contains(string(calls), want) {
			t.Errorf("step %q never ran after a failed step; calls:\n%s", want, calls)
		}
	}
	for _, want := range []string{
		"uninstall: ok      the nodes (barn-node destroy)",
		"uninstall: FAILED  the ssh-config integration (barn-node ssh-config --remove) (exit 4;",
		"uninstall: FAILED  the hosts integration (barn-net hosts uninstall) (exit 7;",
		"uninstall: ok      the host network (barn-net uninstall)",
		"uninstall: not done: 2 step(s) failed",
		"uninstall:   - the ssh-config integration (barn-node ssh-config --remove)",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
}
