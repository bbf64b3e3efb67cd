package vm_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/procid"
	"barn.dev/lib/vm"
)

// TestAuditWithoutRecordedProcess: when no process tuple is recorded (an
// interrupted or failed start), the process table decides: a pidfile
// naming an unrelated live process is not this node's QEMU (inactive,
// never signalled), and a cancelled audit claims nothing.
func TestAuditWithoutRecordedProcess(t *testing.T) {
	f := newFixture(t, fakeBin)
	ctx := context.Background()
	if l := vm.Audit(ctx, f.target(nil)); l.Runtime != vm.RuntimeInactive {
		t.Errorf("no socket, no pidfile, no claimant: runtime %s (%s), want inactive", l.Runtime, l.Detail)
	}
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	os.MkdirAll(f.rt.Directory, 0o700)
	if err := os.WriteFile(f.rt.Pidfile, []byte(strconv.Itoa(sleep.Process.Pid)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if l := vm.Audit(ctx, f.target(nil)); l.Runtime != vm.RuntimeInactive || l.Found != nil {
		t.Errorf("pidfile names an unrelated live process: runtime %s (%s), want inactive", l.Runtime, l.Detail)
	}
	if err := vm.Stop(ctx, f.target(nil), quick()); err != nil {
		t.Fatalf("stop with a foreign pid in the pidfile: %v, want stopped", err)
	}
	if !procid.Alive(sleep.Process.Pid) {
		t.Fatal("the unrelated process named by the pidfile was signalled")
	}
	if _, err := os.Lstat(f.rt.Pidfile); !os.IsNotExist(err) {
		t.Errorf("the stale pidfile naming a foreign pid remains: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	startDirect(t, f, "")
	removeSockets(t, f.rt)
	if l := vm.Audit(cancelled, f.target(nil)); l.Runtime == vm.RuntimeInactive {
		t.Errorf("a cancelled audit claimed inactive (%s)", l.Detail)
	}
}

// TestRuntimeFilesGoneIsNeverProofOfAbsence: the runtime directory of a
// running QEMU is wiped (systemd removes $XDG_RUNTIME_DIR at the last
// logout) while no process tuple was recorded (an interrupted start). A
// missing pidfile and socket prove nothing: the process table shows the
// QEMU running this node's invocation, so the audit says it runs and stop
// adopts it and ends it with verified signals.
func TestRuntimeFilesGoneIsNeverProofOfAbsence(t *testing.T) {
	f := newFixture(t, fakeBin)
	ctx := context.Background()
	proc := startDirect(t, f, "")
	if err := os.RemoveAll(f.rt.Directory); err != nil {
		t.Fatal(err)
	}
	l := vm.Audit(ctx, f.target(nil))
	if l.Runtime == vm.RuntimeInactive || !l.Running || l.Found == nil || l.Found.PID != proc.PID {
		t.Fatalf("audit with the runtime directory gone: %+v, want running, found pid %d", l, proc.PID)
	}
	o := quick()
	log := steps(&o)
	if err := vm.Stop(ctx, f.target(nil), o); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(*log, "\n"); !strings.Contains(got, "process table shows pid") || !strings.Contains(got, "SIGTERM") {
		t.Errorf("ladder steps:\n%s", got)
	}
	if v := procid.Observe(proc); v != procid.Dead {
		t.Errorf("after stop: %s, want dead", v)
	}
	if l := vm.Audit(ctx, f.target(nil)); l.Runtime != vm.RuntimeInactive {
		t.Errorf("after stop: %+v, want inactive", l)
	}
}

// TestAmbiguousClaimantIsNeverSignalled: with QMP gone, a process that
// claims the node's UUID with another command line is neither this node's
// QEMU nor proof that it is gone: unknown, and stop signals nothing.
func TestAmbiguousClaimantIsNeverSignalled(t *testing.T) {
	f := newFixture(t, fakeBin)
	ctx := context.Background()
	proc := startDirect(t, f, "")
	removeSockets(t, f.rt)
	// A shell that keeps "-uuid <the node's UUID>" in its own argv.
	claimant := exec.Command("sh", "-c", "sleep 60; true", "-uuid", "-uuid", f.uuid)
	if err := claimant.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { claimant.Process.Kill(); claimant.Wait() })
	waitCmdline(t, claimant.Process.Pid)
	if l := vm.Audit(ctx, f.target(nil)); l.Runtime != vm.RuntimeUnknown || l.Found != nil {
		t.Errorf("two claimants: %+v, want unknown and nothing found", l)
	}
	err := vm.Stop(ctx, f.target(nil), quick())
	if e := exitcode.As(err); e == nil || e.Class != exitcode.Conflict || e.Reason != "process_unverified" ||
		!strings.Contains(e.Next, strconv.Itoa(claimant.Process.Pid)) {
		t.Fatalf("stop with two claimants: %v, want conflict process_unverified naming pid %d", err, claimant.Process.Pid)
	}
	if procid.Observe(proc) != procid.Ours || claimant.Process.Signal(syscall.Signal(0)) != nil {
		t.Fatal("a process was signalled although the table proved nothing")
	}
}

func waitCmdline(t *testing.T, pid int) {
	t.Helper()
	for i := 0; i < 200; i++ {
		if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); strings.Contains(string(b), "-uuid") {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("pid %d never showed its command line", pid)
}
