package vm_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/procid"
	"barn.dev/lib/vm"
)

// mimicEnv makes this test binary, re-executed, sleep whatever its argv
// says (TestMain): another executable than the fake QEMU, started with a
// node's argv byte for byte.
const mimicEnv = "BARN_VM_TEST_MIMIC"

// startMimic runs this test binary (not the fake QEMU file) with argv[0]
// and every argument of f's invocation, and returns its PID.
func startMimic(t *testing.T, f *fixture) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := &exec.Cmd{Path: self, Args: append([]string{f.inv.Binary}, f.inv.Args...), Env: append(os.Environ(), mimicEnv+"=1")}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitCmdline(t, cmd.Process.Pid)
	return cmd
}

func assertAlive(t *testing.T, cmd *exec.Cmd, after string) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil || !procid.Alive(cmd.Process.Pid) {
		t.Fatalf("the mimic (pid %d) did not survive %s: %v", cmd.Process.Pid, after, err)
	}
}

// TestArgvMimicIsNeverTheNodesQEMU: a process of another executable whose
// argv is the node's invocation byte for byte claims the node, so nothing
// is proven gone, but it is not the node's QEMU: the audit finds nothing
// to adopt (unknown, its PID named), stop signals nothing, and a tuple
// recorded for it (as an older Barn may have adopted it) is not trusted.
func TestArgvMimicIsNeverTheNodesQEMU(t *testing.T) {
	f := newFixture(t, fakeBin)
	ctx := context.Background()
	mimic := startMimic(t, f)
	pid := mimic.Process.Pid
	tuple := mustCapture(t, pid)
	if tuple.ArgvHash != procid.ArgvHash(f.inv) || tuple.Executable == f.inv.Binary {
		t.Fatalf("the mimic's tuple %+v: want the invocation's argv hash from another executable than %s", tuple, f.inv.Binary)
	}

	l := vm.Audit(ctx, f.target(nil))
	if l.Found != nil || l.Running || l.Runtime != vm.RuntimeUnknown || len(l.Unproven) != 1 || l.Unproven[0] != pid ||
		!strings.Contains(l.Detail, "another executable") {
		t.Errorf("audit with a mimic: %+v, want unknown, nothing found, pid %d unproven", l, pid)
	}
	err := vm.Stop(ctx, f.target(nil), quick())
	if e := exitcode.As(err); e == nil || e.Reason != "process_unverified" || !strings.Contains(e.Next, strconv.Itoa(pid)) {
		t.Errorf("stop with a mimic: %v, want conflict process_unverified naming pid %d", err, pid)
	}
	assertAlive(t, mimic, "stop with no tuple")

	recorded := tuple
	if l := vm.Audit(ctx, f.target(&recorded)); l.Running || l.Runtime != vm.RuntimeUnknown || l.Verdict == procid.Ours {
		t.Errorf("audit of a recorded mimic tuple: %+v, want unknown", l)
	}
	err = vm.Stop(ctx, f.target(&recorded), quick())
	if e := exitcode.As(err); e == nil || e.Reason != "process_unverified" {
		t.Errorf("stop of a recorded mimic tuple: %v, want conflict process_unverified", err)
	}
	assertAlive(t, mimic, "stop of its recorded tuple")
}

// TestAdoptRefusesAPidfileNamingAMimic: QMP proves the node's identity
// (its real QEMU answers) but the pidfile names a mimic running the same
// argv from another executable: adopting its tuple would make it the
// process Barn signals. Adopt refuses (integrity executable_mismatch).
func TestAdoptRefusesAPidfileNamingAMimic(t *testing.T) {
	f := newFixture(t, fakeBin)
	startDirect(t, f, "")
	mimic := startMimic(t, f)
	if err := os.WriteFile(f.rt.Pidfile, []byte(strconv.Itoa(mimic.Process.Pid)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := vm.Adopt(context.Background(), f.inv, f.node, f.uuid, f.rt, vm.LaunchOptions{})
	if e := exitcode.As(err); e == nil || e.Class != exitcode.Integrity || e.Reason != "executable_mismatch" || !strings.Contains(e.Message, f.inv.Binary) {
		t.Fatalf("adopt with the pidfile naming a mimic: %+v, %v; want integrity executable_mismatch", p, err)
	}
}
