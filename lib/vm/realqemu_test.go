package vm_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/procid"
	"barn.dev/lib/qmp"
	"barn.dev/lib/vm"
	"barn.dev/lib/vmrecord"
)

// realQEMU returns a fixture whose invocation runs the installed
// qemu-system-x86_64 under TCG with a real (empty) qcow2 base, a root
// overlay over it and a raw seed, PrivateNet none. It skips when QEMU or qemu-img is not installed.
func realQEMU(t *testing.T) *fixture {
	t.Helper()
	bin, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Skip("qemu-system-x86_64 not installed:", err)
	}
	img, err := exec.LookPath("qemu-img")
	if err != nil {
		t.Skip("qemu-img not installed:", err)
	}
	bin, _ = filepath.EvalSymlinks(bin)
	f := newFixture(t, bin)
	base, root := filepath.Join(f.dir, "base.qcow2"), filepath.Join(f.dir, "root.qcow2")
	for _, args := range [][]string{{"-f", "qcow2", base, "16M"}, {"-f", "qcow2", "-F", "qcow2", "-b", base, root, "16M"}} {
		if err := os.Remove(args[len(args)-2]); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(img, append([]string{"create", "-q"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img: %v: %s", err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(f.dir, "seed.iso"), make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func launchReal(t *testing.T, f *fixture) vmrecord.Process {
	t.Helper()
	p, err := vm.Launch(context.Background(), f.inv, f.node, f.uuid, f.rt)
	if err != nil {
		t.Fatalf("launching real QEMU: %v", err)
	}
	t.Cleanup(func() { killIfOurs(p) })
	return p
}

func TestRealQEMULaunchIdentityPowerdownIgnoredQuit(t *testing.T) {
	f := realQEMU(t)
	start := time.Now()
	proc := launchReal(t, f)
	t.Logf("real QEMU (TCG) launch to QMP identity: %s", time.Since(start))

	if proc.Executable != f.inv.Binary {
		t.Errorf("executable %q, want %q", proc.Executable, f.inv.Binary)
	}
	if proc.ArgvHash != procid.ArgvHash(f.inv) || !strings.HasPrefix(proc.Started, "procstat:") || proc.Boot == "" {
		t.Errorf("tuple %+v", proc)
	}
	if pid, err := vm.ReadPidfile(f.rt.Pidfile); err != nil || pid != proc.PID {
		t.Errorf("pidfile %d %v, want %d", pid, err, proc.PID)
	}
	for _, sock := range f.rt.Sockets() { // QEMU reads both monitors from Barn's argv
		name, uuid, err := qmp.Identity(context.Background(), sock)
		if err != nil || name != f.node || uuid != f.uuid {
			t.Errorf("QMP identity on %s: %q %q %v", sock, name, uuid, err)
		}
	}
	var qe *qmp.Error
	if err := (qmp.Monitor{Socket: f.rt.QMP}).Execute(context.Background(), "no-such-command", nil, nil); !errors.As(err, &qe) || qe.Class != "CommandNotFound" {
		t.Errorf("unknown command: %v, want a QMP error keeping class CommandNotFound", err)
	}
	l := vm.Audit(context.Background(), f.target(&proc))
	if !l.Running || l.Runtime != vm.RuntimeRunning || l.Status != "running" {
		t.Errorf("audit %+v", l)
	}

	// Wrong expected UUID: integrity, nothing sent, QEMU keeps running.
	o := quick()
	log := steps(&o)
	other := f.target(&proc)
	other.UUID = "00000000-0000-4000-8000-000000000001"
	err := vm.Stop(context.Background(), other, o)
	if e := exitcode.As(err); e == nil || e.Class != exitcode.Integrity || len(*log) != 0 {
		t.Fatalf("stop with another uuid: %v steps %q", err, *log)
	}
	if procid.Observe(proc) != procid.Ours {
		t.Fatal("QEMU died after a refused stop")
	}

	// No guest OS handles the ACPI power button: powerdown is ignored → quit.
	o = quick()
	o.Graceful = time.Second
	log = steps(&o)
	if err := vm.Stop(context.Background(), f.target(&proc), o); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(*log, "\n")
	if !strings.Contains(got, "system_powerdown") || !strings.Contains(got, "QMP quit") || strings.Contains(got, "SIG") {
		t.Errorf("ladder steps:\n%s", got)
	}
	if v := procid.Observe(proc); v != procid.Dead {
		t.Errorf("after stop: %s", v)
	}
	assertNoRuntimeFiles(t, f.rt)
}

func TestRealQEMUSIGTERMWhenQMPUnavailable(t *testing.T) {
	f := realQEMU(t)
	proc := launchReal(t, f)
	// Make QMP unavailable: the socket paths are gone (a damaged runtime dir).
	removeSockets(t, f.rt)
	l := vm.Audit(context.Background(), f.target(&proc))
	if !errors.Is(l.QMP, qmp.ErrUnavailable) || l.Verdict != procid.Ours || l.Runtime != vm.RuntimeUnknown {
		t.Errorf("audit with QMP gone %+v", l)
	}
	o := quick()
	log := steps(&o)
	if err := vm.Stop(context.Background(), f.target(&proc), o); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(*log, "\n")
	if !strings.Contains(got, "QMP unavailable") || !strings.Contains(got, "SIGTERM") || strings.Contains(got, "SIGKILL") {
		t.Errorf("ladder steps:\n%s", got)
	}
	if v := procid.Observe(proc); v != procid.Dead {
		t.Errorf("after stop: %s", v)
	}
	assertNoRuntimeFiles(t, f.rt)
}

func TestRealQEMUEarlyExitReturnsStderr(t *testing.T) {
	f := realQEMU(t)
	os.Remove(filepath.Join(f.dir, "root.qcow2"))
	_, err := vm.Launch(context.Background(), f.inv, f.node, f.uuid, f.rt)
	e := exitcode.As(err)
	if e == nil || e.Reason != "qemu_start_failed" || !strings.Contains(e.Message, "root.qcow2") {
		t.Fatalf("launch without a root disk: %v, want qemu_start_failed with QEMU's stderr", err)
	}
	assertNoRuntimeFiles(t, f.rt)
}

// TestRealQEMUFrozenEscalates freezes QEMU (SIGSTOP): the kernel accepts
// QMP connections but nobody greets, so QMP is busy, and the process table
// proves why: every thread is stopped, so no monitor can answer until it
// is continued. A stopped process ignores SIGTERM until continued, so the
// ladder must re-capture and SIGKILL.
func TestRealQEMUFrozenEscalates(t *testing.T) {
	f := realQEMU(t)
	proc := launchReal(t, f)
	if err := syscall.Kill(proc.PID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	o := quick()
	o.TermWait = 500 * time.Millisecond
	log := steps(&o)
	if err := vm.Stop(context.Background(), f.target(&proc), o); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(*log, "\n")
	if !strings.Contains(got, "is stopped") || !strings.Contains(got, "SIGTERM") || !strings.Contains(got, "SIGKILL") {
		t.Errorf("ladder steps:\n%s", got)
	}
	if v := procid.Observe(proc); v != procid.Dead {
		t.Errorf("after stop: %s", v)
	}
	assertNoRuntimeFiles(t, f.rt) // SIGKILL left them; Stop removed the stale ones
}

// TestRealQEMUOperatorSessionDoesNotBlockBarn: an operator's session (socat,
// a debugging client) holds the QMP socket Barn leaves to operators. QEMU
// serves each monitor to one client, but Barn has a monitor of its own, so
// stop still proves the identity and powers down cleanly over QMP: no
// guest OS handles the power button here, so system_powerdown is ignored
// and QMP quit ends it, with no signal.
func TestRealQEMUOperatorSessionDoesNotBlockBarn(t *testing.T) {
	f := realQEMU(t)
	proc := launchReal(t, f)
	holdMonitor(t, f.rt.QMP)
	if _, _, err := (qmp.Monitor{Socket: f.rt.QMP, Timeout: 300 * time.Millisecond}).Identity(context.Background()); !errors.Is(err, qmp.ErrBusy) {
		t.Fatalf("a second client of the held operator socket: %v, want busy (QEMU serves one client per monitor)", err)
	}
	if l := vm.Audit(context.Background(), f.target(&proc)); l.Runtime != vm.RuntimeRunning || l.Status != "running" {
		t.Errorf("audit with the operator socket held %+v", l)
	}
	o := quick()
	o.Graceful = time.Second
	log := steps(&o)
	if err := vm.Stop(context.Background(), f.target(&proc), o); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(*log, "\n"); !strings.Contains(got, "system_powerdown") || !strings.Contains(got, "QMP quit") || strings.Contains(got, "SIG") {
		t.Errorf("ladder steps with the operator socket held:\n%s", got)
	}
	if v := procid.Observe(proc); v != procid.Dead {
		t.Errorf("after stop: %s", v)
	}
	assertNoRuntimeFiles(t, f.rt)
}

// TestRealQEMUHeldBarnMonitorIsBusyNotAbsent: something holds Barn's own
// monitor. QEMU queues Barn's connection and never greets it: that is a
// busy monitor, not an absent QEMU. Stop sends nothing, no signal either,
// and says who to ask; once the other client leaves, stop powers the VM
// down over QMP.
func TestRealQEMUHeldBarnMonitorIsBusyNotAbsent(t *testing.T) {
	f := realQEMU(t)
	proc := launchReal(t, f)
	release := holdMonitor(t, f.rt.BarnQMP)

	o := quick()
	o.Graceful = time.Second
	log := steps(&o)
	err := vm.Stop(context.Background(), f.target(&proc), o)
	holder := "pid " + strconv.Itoa(os.Getpid()) // this test holds it
	if e := exitcode.As(err); e == nil || e.Class != exitcode.Conflict || e.Reason != "qmp_busy" ||
		!strings.Contains(e.Message, "held by "+holder) || !strings.Contains(e.Next, "end the QMP session of "+holder+" on "+f.rt.BarnQMP) {
		t.Fatalf("stop with Barn's monitor held by another client: %v, want conflict qmp_busy naming the socket and its holder", err)
	}
	if got := strings.Join(*log, "\n"); strings.Contains(got, "SIG") || strings.Contains(got, "unavailable") {
		t.Errorf("ladder steps with a held monitor:\n%s", got)
	}
	if v := procid.Observe(proc); v != procid.Ours {
		t.Fatalf("QEMU after a refused stop: %s", v)
	}
	if l := vm.Audit(context.Background(), f.target(&proc)); !errors.Is(l.QMP, qmp.ErrBusy) || !l.Running || l.Runtime == vm.RuntimeInactive {
		t.Errorf("audit with a held monitor %+v", l)
	}

	release()
	// QEMU notices the closed client, and then accepts queued ones, when
	// it gets to it: on a loaded host (or under -race) that took longer
	// than the 500 ms bound that proved the held monitor busy, and a
	// connect meanwhile can find the backlog full (EAGAIN: busy, at
	// once). Wait, with a deadline, until an audit finds the monitor
	// answering; the stop then has it free.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		l := vm.Audit(context.Background(), f.target(&proc))
		if l.QMP == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the released monitor still does not answer after 60 s: %v", l.QMP)
		}
	}
	o.QMPTimeout = 10 * time.Second
	log = steps(&o)
	if err := vm.Stop(context.Background(), f.target(&proc), o); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(*log, "\n"); !strings.Contains(got, "system_powerdown") || strings.Contains(got, "SIG") {
		t.Errorf("ladder steps once released:\n%s", got)
	}
	if v := procid.Observe(proc); v != procid.Dead {
		t.Errorf("after stop: %s", v)
	}
}

// holdMonitor connects to a QMP socket as another client would, reads the
// greeting and keeps the connection open until the returned release (or
// the test's end).
func holdMonitor(t *testing.T, sock string) (release func()) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
		t.Fatalf("holding %s: no greeting: %v", sock, err)
	}
	var once sync.Once
	release = func() { once.Do(func() { c.Close() }) }
	t.Cleanup(release)
	return release
}

func TestRealQEMUCrashIsInactive(t *testing.T) {
	f := realQEMU(t)
	proc := launchReal(t, f)
	syscall.Kill(proc.PID, syscall.SIGKILL)
	awaitDead(t, proc)
	l := vm.Audit(context.Background(), f.target(&proc))
	if l.Running || l.Runtime != vm.RuntimeInactive || l.Verdict != procid.Dead {
		t.Fatalf("audit after crash %+v", l)
	}
	if err := vm.Stop(context.Background(), f.target(&proc), quick()); err != nil {
		t.Fatal(err)
	}
	assertNoRuntimeFiles(t, f.rt)
}

// Pause and resume are QMP stop and cont on the same process (query-status
// says paused, then running); kill is one verified SIGKILL after which the
// audit proves the VM inactive.
func TestRealQEMUPauseResumeKill(t *testing.T) {
	f := realQEMU(t)
	proc := launchReal(t, f)
	ctx := context.Background()
	status := func() string {
		t.Helper()
		l := vm.Audit(ctx, f.target(&proc))
		if !l.Running {
			t.Fatalf("audit: %+v", l)
		}
		return l.Status
	}
	if s := status(); s != "running" && s != "prelaunch" {
		t.Fatalf("before pause: %q", s)
	}
	if err := vm.Control(ctx, f.target(&proc), "stop", quick()); err != nil {
		t.Fatal(err)
	}
	if s := status(); s != "paused" {
		t.Fatalf("after stop: %q", s)
	}
	if err := vm.Control(ctx, f.target(&proc), "cont", quick()); err != nil {
		t.Fatal(err)
	}
	if s := status(); s != "running" {
		t.Fatalf("after cont: %q", s)
	}
	if err := vm.Kill(ctx, f.target(&proc), quick()); err != nil {
		t.Fatal(err)
	}
	if v := procid.Observe(proc); v != procid.Dead {
		t.Fatalf("after kill the process is %s", v)
	}
	if l := vm.Audit(ctx, f.target(&proc)); l.Running || l.Runtime != vm.RuntimeInactive {
		t.Fatalf("audit after kill %+v", l)
	}
	if err := vm.Kill(ctx, f.target(&proc), quick()); exitcode.As(err).Reason != "node_not_running" {
		t.Fatalf("second kill: %v", err)
	}
}
