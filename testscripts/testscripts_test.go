// Package testscripts holds Barn's end-to-end suites: txtar scripts that
// run the real tools, in process, the way users pipe them.
//
// testdata/script runs the whole pipeline on the fake QEMU from
// lib/fakeqemu (fast, no root); testdata/lab (lab_test.go) runs it on real
// QEMU in a network namespace. Golden files inside scripts are regenerated
// with BARN_UPDATE=1.
package testscripts

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	inventory "barn.dev/barn-inventory/cli"
	net "barn.dev/barn-net/cli"
	node "barn.dev/barn-node/cli"
	plan "barn.dev/barn-plan/cli"
	repo "barn.dev/barn-repo/cli"
	state "barn.dev/barn-state/cli"
	"barn.dev/lib/fakeqemu"
	"barn.dev/lib/scripttest"
	libstate "barn.dev/lib/state"
)

// fakeQEMU is the command name the fake QEMU is registered under. It is
// deliberately not qemu-system-x86_64: testscript puts every registered
// command on PATH, and the lab suite must keep finding the real QEMU.
const fakeQEMU = "fake-" + fakeqemu.BinaryName

// Tools maps every Barn tool's name to its in-process entry point.
var Tools = map[string]func(){
	"barn-inventory": scripttest.Command(inventory.Main),
	"barn-plan":      scripttest.Command(plan.Main),
	"barn-node":      scripttest.Command(node.Main),
	"barn-net":       scripttest.Command(net.Main),
	"barn-repo":      scripttest.Command(repo.Main),
	"barn-state":     scripttest.Command(state.Main),
}

func TestMain(m *testing.M) {
	node.CrashHook = scripttest.CrashAfter  // BARN_CRASH_AFTER exists only in test binaries
	node.FirmwareHook = scripttest.Firmware // and BARN_TEST_FIRMWARE
	cmds := map[string]func(){fakeQEMU: func() { os.Exit(fakeqemu.Main(os.Args[1:])) }}
	for name, f := range Tools {
		cmds[name] = f
	}
	testscript.Main(m, cmds)
}

func params(dir string) testscript.Params {
	return scripttest.Params(dir)
}

// TestPipeline runs the multi-tool pipeline scripts of testdata/script
// on the fake QEMU (pipelineParams).
func TestPipeline(t *testing.T) {
	scripttest.Run(t, pipelineParams("testdata/script"))
}

// pipelineParams runs the scripts of dir on the fake QEMU: BARN_QEMU
// names the registered fake, TCG by explicit opt-in, no private NIC
// (BARN_PRIVATE_NET=none and BARN_READINESS=none are test-only switches),
// and a short runtime directory under /tmp so QMP socket paths stay below
// the 107-byte limit. Every fake QEMU still alive when a script ends is
// killed (only those whose pidfile and command line are this script's).
func pipelineParams(dir string) testscript.Params {
	p := params(dir)
	setup := p.Setup
	p.Setup = func(env *testscript.Env) error {
		if err := setup(env); err != nil {
			return err
		}
		rt, err := os.MkdirTemp("/tmp", "bpipe")
		if err != nil {
			return err
		}
		env.Setenv("BARN_RUNTIME_DIR", rt)
		env.Setenv("BARN_QEMU", fakeQEMU)
		env.Setenv("BARN_ACCEL", "tcg")
		env.Setenv("BARN_PRIVATE_NET", "none")
		env.Setenv("BARN_READINESS", "none")
		env.Setenv("BARN_STOP_TIMEOUT", "2s")
		env.Setenv("BARN_REPO", "")
		env.Defer(func() {
			reapFakes(rt)
			os.RemoveAll(rt)
		})
		return nil
	}
	p.Cmds["fakes"] = cmdFakes
	p.Cmds["onlyimages"] = cmdOnlyImages
	p.Cmds["killfake"] = cmdKillFake
	p.Cmds["converge"] = cmdConverge
	return p
}

// liveFakes returns the live (not zombie) fake QEMU processes of the
// runtime dir rt, PID → node name (its -name): every process in /proc whose
// executable name is the fake and whose command line names a path under rt,
// so another script's fakes and unrelated processes never count.
func liveFakes(rt string) map[int]string {
	live := map[int]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 {
			continue
		}
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(cmd), "\x00"), "\x00")
		if len(argv) == 0 || filepath.Base(argv[0]) != fakeQEMU || !strings.Contains(string(cmd), rt+"/") {
			continue
		}
		if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && strings.Contains(string(stat), ") Z ") {
			continue
		}
		live[pid] = nameArg(argv)
	}
	return live
}

// nameArg returns the value of argv's -name (up to the first comma).
func nameArg(argv []string) string {
	for i := 0; i+1 < len(argv); i++ {
		if argv[i] == "-name" {
			return strings.SplitN(argv[i+1], ",", 2)[0]
		}
	}
	return "?"
}

func reapFakes(rt string) {
	for pid := range liveFakes(rt) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// cmdFakes: `fakes N` asserts that exactly N fake QEMU processes of this
// script are alive (waiting up to 5 s for exiting ones to go); `fakes N
// NAME...` also asserts which nodes they run (as -name says) and that each
// one's PID is the one recorded in that node's committed state.
func cmdFakes(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: fakes COUNT [NODE...]")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	rt := ts.Getenv("BARN_RUNTIME_DIR")
	var live map[int]string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		live = liveFakes(rt)
		if len(live) == want || time.Now().After(deadline) {
			break
		}
	}
	var names []string
	for _, n := range live {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(live) != want {
		ts.Fatalf("%d fake QEMU process(es) alive (%s), want %d", len(live), strings.Join(names, " "), want)
	}
	if len(args) > 1 {
		wantNames := append([]string(nil), args[1:]...)
		sort.Strings(wantNames)
		if strings.Join(names, " ") != strings.Join(wantNames, " ") {
			ts.Fatalf("fake QEMUs run %q, want %q", strings.Join(names, " "), strings.Join(wantNames, " "))
		}
		root, err := libstate.Open(ts.Getenv)
		ts.Check(err)
		for pid, name := range live {
			n, err := root.ReadNode(name)
			ts.Check(err)
			if n == nil || n.Process == nil || n.Process.PID != pid {
				ts.Fatalf("fake QEMU %d runs %s but its committed state does not record that PID", pid, name)
			}
		}
	}
}

// cmdKillFake: `killfake NODE` SIGKILLs the live fake QEMU running NODE
// (found by its command line, never by pidfile alone) and waits up to 5 s
// for it to be gone, leaving its pidfile and QMP socket behind as a crash
// would.
func cmdKillFake(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: killfake NODE")
	}
	rt := ts.Getenv("BARN_RUNTIME_DIR")
	pid := 0
	for p, name := range liveFakes(rt) {
		if name == args[0] {
			pid = p
		}
	}
	if pid == 0 {
		ts.Fatalf("no live fake QEMU runs %s", args[0])
	}
	ts.Check(syscall.Kill(pid, syscall.SIGKILL))
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, alive := liveFakes(rt)[pid]; !alive {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("fake QEMU %d (%s) survived SIGKILL", pid, args[0])
		}
	}
}

// cmdOnlyImages: `onlyimages` asserts that BARN_HOME holds nothing but the
// image cache (images/, catalogs and manifests included) and the runtime
// directory holds nothing at all. The one tolerated exception is an EMPTY
// (unheld, no holder record) locks/deployment.lock or locks/images.lock:
// the lock the purge itself held, and the image cache's lock; unlinking a
// flock file another process may be waiting on would let two holders in.
// Every other file fails the script, listed.
func cmdOnlyImages(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: onlyimages")
	}
	home := ts.Getenv("BARN_HOME")
	root := libstate.Root{Dir: home}
	var extra []string
	err := filepath.WalkDir(home, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case p == home:
			return nil
		case p == root.ImagesDir():
			return filepath.SkipDir
		case d.IsDir():
			return nil
		case idleLock(home, p):
			return nil
		}
		extra = append(extra, strings.TrimPrefix(p, home+"/"))
		return nil
	})
	ts.Check(err)
	ents, _ := os.ReadDir(ts.Getenv("BARN_RUNTIME_DIR"))
	for _, e := range ents {
		extra = append(extra, "runtime:"+e.Name())
	}
	if len(extra) > 0 {
		ts.Fatalf("BARN_HOME holds more than the image cache:\n%s", strings.Join(extra, "\n"))
	}
}

// idleLock reports whether p is locks/deployment.lock or locks/images.lock
// and empty (no holder record: nobody holds it).
func idleLock(home, p string) bool {
	rel := strings.TrimPrefix(p, home+"/")
	switch rel {
	case libstate.LocksDirName + "/" + libstate.DeploymentLockName,
		libstate.LocksDirName + "/" + libstate.ImagesLockName,
		libstate.LocksDirName + "/" + libstate.EventsLockName:
	default:
		return false
	}
	fi, err := os.Lstat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Size() == 0
}
