package testscripts

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"barn.dev/lib/hostnet"
	"barn.dev/lib/scripttest"
	"barn.dev/lib/testexec"
)

// TestLab runs the real-lab scripts in testdata/lab: real QEMU under TCG,
// the locally built Debian image, a bridge and taps inside a network
// namespace the script's setup creates (and removes afterwards). It needs
// root, qemu-system-x86_64 and BARN_TEST_REPO pointing at the repository
// printed by `scripts/build-image.sh --arm64` (`make ci` and `make e2e`
// set it); once it can run, a missing qemu-system-aarch64 (one script
// boots an arm64 node) fails it. It runs beside both host-under-test
// guests (`make e2e` gives go test room for every script and both guests
// at once).
func TestLab(t *testing.T) {
	t.Parallel()
	if reason := labUnavailable(); reason != "" {
		t.Skipf("real-lab suite not run: %s", reason)
	}
	if _, err := exec.LookPath("qemu-system-aarch64"); err != nil {
		t.Fatalf("testdata/lab needs qemu-system-aarch64 (sudo scripts/install-deps.sh): %v", err)
	}
	runLab(t, "testdata/lab")
}

// TestArm64Lab runs testdata/lab-arm64: the 2-node arm64 lab (addresses,
// ping, exec, NVRAM, the refused recreate without the emulator), outside
// `make ci`, which boots one arm64 node (testdata/lab/lab_single.txtar):
// two more arm64 boots under TCG cost more than it has.
func TestArm64Lab(t *testing.T) {
	runRequestedLab(t, "BARN_TEST_ARM64", "make e2e-arm64", "testdata/lab-arm64", "qemu-system-aarch64")
}

// runRequestedLab runs the real-lab scripts in dir only when the
// environment variable gate is 1 (target, a make target, sets it); once
// requested, a lab that cannot run — or a missing emulator among needs —
// fails, it does not skip.
func runRequestedLab(t *testing.T, gate, target, dir string, needs ...string) {
	if os.Getenv(gate) != "1" {
		t.Skipf("%s not requested: run `%s` (%s=1)", dir, target, gate)
	}
	if reason := labUnavailable(); reason != "" {
		t.Fatalf("%s requested but cannot run: %s", dir, reason)
	}
	for _, bin := range needs {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s needs %s (sudo scripts/install-deps.sh): %v", dir, bin, err)
		}
	}
	runLab(t, dir)
}

// runLab runs the real-lab scripts in dir, each in its own namespace.
func runLab(t *testing.T, dir string) {
	p := params(dir)
	setup := p.Setup
	p.Setup = func(env *testscript.Env) error {
		if err := setup(env); err != nil {
			return err
		}
		// The runtime directory is short (QMP socket paths ≤107 bytes),
		// so it is not under the work dir; it goes once the lab is down.
		run, err := os.MkdirTemp("/tmp", "barn-e2e-run-")
		if err != nil {
			return err
		}
		env.Defer(func() { _ = os.RemoveAll(run) })
		env.Setenv("BARN_RUNTIME_DIR", run)
		if _, err := labNamespace(env, "barn-e2e-", "BARN_HOME", "BARN_RUNTIME_DIR"); err != nil {
			return err
		}
		env.Setenv("BARN_NET_STATE", env.WorkDir+"/netstate")
		env.Setenv("BARN_REPO", os.Getenv("BARN_TEST_REPO"))
		env.Setenv("BARN_ACCEL", "tcg")
		// A loaded 2-core host boots a TCG guest in 3-10 minutes; the
		// readiness wait must not turn load into a verdict.
		env.Setenv("BARN_READY_TIMEOUT", "25m")
		return nil
	}
	p.Condition = labCondition
	p.Cmds["inns"] = cmdInNamespace
	p.Cmds["killqemu"] = cmdKillQEMU
	p.Cmds["noqemu"] = cmdNoQEMU
	p.Cmds["robind"] = cmdROBind
	scripttest.Run(t, p)
}

// copyHelper copies the host's qemu-bridge-helper into dir as a root-owned
// 0755 file (no setuid bit, as a fresh package leaves it) and returns its
// path. The test's directories above it (private to root) become
// searchable by others: barn-net's readiness proof runs QEMU, and so the
// helper, as an unprivileged user.
func copyHelper(dir string) (string, error) {
	src, found := hostnet.HelperPath(func(string) string { return "" })
	if !found {
		return "", fmt.Errorf("qemu-bridge-helper is not installed (looked in %s)", strings.Join(hostnet.HelperPaths, ", "))
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for d := dir; strings.HasPrefix(d, os.TempDir()+"/"); d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return "", err
		}
		if err := os.Chmod(d, fi.Mode().Perm()|0o001); err != nil {
			return "", err
		}
	}
	dst := filepath.Join(dir, "qemu-bridge-helper")
	if err := testexec.WriteScript(dst, b); err != nil {
		return "", err
	}
	return dst, os.Chmod(dst, 0o755)
}

// labNamespace confines a lab script to a new network namespace named
// prefix plus 8 hex digits, set as $NS: the host network is installed
// for real, but `ip netns exec` bind-mounts /etc/netns/$NS/qemu over
// /etc/qemu (so bridge.conf is the namespace's own). When the script
// ends (deferred calls run last-in first-out) it kills the QEMUs whose
// command line mentions the final value of any of the variables marks,
// undoes the host network (barn-net uninstall in $NS), drops the
// namespace and removes /etc/netns/$NS. barn-net's run directory is the
// script's own (netRunDir), and so is the bridge helper: BARN_NET_HELPER
// (read by barn-net and by barn-node's QEMU alike) is a copy of the
// host's under $WORK (copyHelper), so no script changes the host's helper
// and labs side by side never race for its one setuid bit.
func labNamespace(env *testscript.Env, prefix string, marks ...string) (string, error) {
	ns, err := newNamespace(prefix)
	if err != nil {
		return "", err
	}
	env.Setenv("NS", ns)
	undoEtc, err := namespaceEtc(ns)
	if err != nil {
		_ = exec.Command("ip", "netns", "del", ns).Run()
		return "", err
	}
	env.Defer(undoEtc)
	env.Defer(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	env.Defer(func() {
		cmd := exec.Command("ip", "netns", "exec", ns, "barn-net", "uninstall", "--yes")
		cmd.Env = env.Vars
		_ = cmd.Run()
	})
	if err := netRunDir(env); err != nil {
		return "", err
	}
	helper, err := copyHelper(env.WorkDir + "/usr/lib/qemu")
	if err != nil {
		return "", err
	}
	env.Setenv("BARN_NET_HELPER", helper)
	env.Defer(func() {
		var paths []string
		for _, m := range marks {
			paths = append(paths, env.Getenv(m))
		}
		killLab(paths...)
	})
	return ns, nil
}

// netRunDir sets BARN_NET_RUN to $WORK/netrun, so that barn-net's lock
// files (every barn-net the script runs: the lab's, demo.sh's, the final
// uninstall) stay in the work dir instead of /run, where nothing would
// remove them. What barn-net reads there is /run's: netns (the named
// namespaces' pins) and systemd (whether systemd is PID 1, networkd's
// runtime state), linked.
func netRunDir(env *testscript.Env) error {
	run := filepath.Join(env.WorkDir, "netrun")
	if err := os.Mkdir(run, 0o755); err != nil {
		return err
	}
	for _, name := range []string{"netns", "systemd"} {
		if _, err := os.Stat(filepath.Join("/run", name)); err != nil {
			continue
		}
		if err := os.Symlink(filepath.Join("/run", name), filepath.Join(run, name)); err != nil {
			return err
		}
	}
	env.Setenv("BARN_NET_RUN", run)
	return nil
}

// labCondition answers the lab scripts' conditions: [netem] is true when
// this kernel takes a netem qdisc (CONFIG_NET_SCH_NETEM), probed once on a
// tap (the device a degrade puts it on; a dummy link would need
// CONFIG_DUMMY, which this CI kernel lacks) in a namespace of its own.
func labCondition(cond string) (bool, error) {
	if cond != "netem" {
		return false, fmt.Errorf("unknown condition %q", cond)
	}
	netemOnce.Do(func() {
		ns, err := newNamespace("barn-probe-")
		if err != nil {
			netemErr = err
			return
		}
		defer exec.Command("ip", "netns", "del", ns).Run()
		if out, err := exec.Command("ip", "-n", ns, "tuntap", "add", "probe0", "mode", "tap").CombinedOutput(); err != nil {
			netemErr = fmt.Errorf("probing netem: %v: %s", err, out)
			return
		}
		netemOK = exec.Command("tc", "-n", ns, "qdisc", "add", "dev", "probe0", "root", "netem", "delay", "1ms").Run() == nil
	})
	return netemOK, netemErr
}

var (
	netemOnce sync.Once
	netemOK   bool
	netemErr  error
)

func labUnavailable() string {
	switch {
	case os.Geteuid() != 0:
		return "needs root for network namespaces"
	case os.Getenv("BARN_TEST_REPO") == "":
		return "BARN_TEST_REPO is unset (run `make e2e`, which builds the image first)"
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		return "qemu-system-x86_64 is not installed"
	}
	return ""
}

// newNamespace creates a network namespace named prefix plus 8 random hex
// digits, with loopback up.
func newNamespace(prefix string) (string, error) {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	ns := prefix + hex.EncodeToString(b)
	for _, args := range [][]string{{"netns", "add", ns}, {"-n", ns, "link", "set", "lo", "up"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return "", fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return ns, nil
}

// cmdInNamespace runs `inns PROG ARGS...` inside the script's namespace $NS.
func cmdInNamespace(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 {
		ts.Fatalf("usage: inns PROG [ARGS...]")
	}
	err := ts.Exec("ip", append([]string{"netns", "exec", ts.Getenv("NS")}, args...)...)
	if neg != (err != nil) {
		if neg {
			ts.Fatalf("unexpected success of %s", args[0])
		}
		ts.Fatalf("%s: %v", args[0], err)
	}
}

// cmdKillQEMU runs `killqemu NODE`: SIGKILL the node's QEMU behind Barn's
// back (the pid recorded in its committed state) and wait until it is gone.
func cmdKillQEMU(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: killqemu NODE")
	}
	data, err := os.ReadFile(filepath.Join(ts.Getenv("BARN_HOME"), "nodes", args[0], "state.json"))
	ts.Check(err)
	var st struct {
		Process *struct {
			PID int `json:"pid"`
		} `json:"process"`
	}
	ts.Check(json.Unmarshal(data, &st))
	if st.Process == nil || st.Process.PID <= 0 {
		ts.Fatalf("node %s has no recorded process", args[0])
	}
	ts.Check(syscall.Kill(st.Process.PID, syscall.SIGKILL))
	for i := 0; i < 100; i++ {
		if syscall.Kill(st.Process.PID, 0) != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	ts.Fatalf("pid %d survived SIGKILL", st.Process.PID)
}

// cmdROBind runs `robind SRC DIR`: bind-mounts SRC over DIR read-only, a
// host directory no process (root and QEMU included) can write; the mount
// is undone when the script ends.
func cmdROBind(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: robind SRC DIR")
	}
	src, dir := ts.MkAbs(args[0]), ts.MkAbs(args[1])
	if out, err := exec.Command("mount", "--bind", src, dir).CombinedOutput(); err != nil {
		ts.Fatalf("mount --bind %s %s: %v: %s", src, dir, err, out)
	}
	ts.Defer(func() { _ = exec.Command("umount", "-l", dir).Run() })
	if out, err := exec.Command("mount", "-o", "remount,bind,ro", dir).CombinedOutput(); err != nil {
		ts.Fatalf("remount %s read-only: %v: %s", dir, err, out)
	}
}

// cmdNoQEMU runs `noqemu [MARK...]`: fails when any QEMU command line mentions
// this script's state root or runtime directory (or one of the MARKs).
func cmdNoQEMU(ts *testscript.TestScript, neg bool, args []string) {
	marks := [][]byte{[]byte(ts.Getenv("BARN_HOME")), []byte(ts.Getenv("BARN_RUNTIME_DIR"))}
	if len(args) > 0 { // `noqemu MARK...`: these paths instead
		marks = nil
		for _, a := range args {
			marks = append(marks, []byte(a))
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var found []string
	for _, p := range procs {
		cmdline, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(cmdline, []byte("qemu")) {
			continue
		}
		for _, m := range marks {
			if len(m) > 0 && bytes.Contains(cmdline, m) {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
				found = append(found, strconv.Itoa(pid))
				break
			}
		}
	}
	if (len(found) > 0) != neg {
		if neg {
			ts.Fatalf("no QEMU process of this lab is running")
		}
		ts.Fatalf("QEMU processes of this lab still run: pids %s", strings.Join(found, " "))
	}
}

// killLab SIGKILLs every QEMU whose command line mentions the lab's state
// root or runtime directory (cleanup after a failed script), and waits up
// to 10 s for them to be gone, so their taps and files are released
// before the namespace and directories are removed.
func killLab(marks ...string) {
	var killed []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		cmdline, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(cmdline, []byte("qemu")) {
			continue
		}
		for _, m := range marks {
			if m != "" && bytes.Contains(cmdline, []byte(m)) {
				if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil && syscall.Kill(pid, syscall.SIGKILL) == nil {
					killed = append(killed, pid)
				}
				break
			}
		}
	}
	for deadline := time.Now().Add(10 * time.Second); len(killed) > 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if syscall.Kill(killed[0], 0) != nil {
			killed = killed[1:]
		}
	}
}

// namespaceEtc prepares /etc/netns/NS/qemu, which `ip netns exec NS`
// bind-mounts over /etc/qemu (the mount point must exist on the host). The
// returned func removes what it created.
func namespaceEtc(ns string) (func(), error) {
	etcQemu.Lock()
	defer etcQemu.Unlock()
	if etcQemu.users == 0 {
		if _, err := os.Stat("/etc/qemu"); os.IsNotExist(err) {
			if err := os.Mkdir("/etc/qemu", 0o755); err != nil {
				return nil, err
			}
			etcQemu.created = true
		}
	}
	// Another process's script may remove an empty /etc/netns between
	// MkdirAll's parent and child (`make ci` runs the unit pass beside
	// this one): try again, a bounded number of times.
	var err error
	for try := 0; try < 5; try++ {
		if err = os.MkdirAll(filepath.Join("/etc/netns", ns, "qemu"), 0o755); !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	etcQemu.users++
	return func() {
		etcQemu.Lock()
		defer etcQemu.Unlock()
		_ = os.RemoveAll(filepath.Join("/etc/netns", ns))
		_ = os.Remove("/etc/netns") // only when empty
		etcQemu.users--
		// Another namespace (the demo, another process's run) may still
		// mount over /etc/qemu: keep it while any /etc/netns/*/qemu exists.
		if others, _ := filepath.Glob("/etc/netns/*/qemu"); etcQemu.users == 0 && etcQemu.created && len(others) == 0 {
			_ = os.Remove("/etc/qemu") // only when empty
			etcQemu.created = false
		}
	}, nil
}

// etcQemu counts the scripts of this process using /etc/qemu, which the
// first creates when the host has none and the last removes: lab scripts
// run side by side, and a check-then-create of their own raced.
var etcQemu struct {
	sync.Mutex
	users   int
	created bool
}
