package vm_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/fakeqemu"
	"barn.dev/lib/imageref"
	"barn.dev/lib/internal/testport"
	"barn.dev/lib/procid"
	"barn.dev/lib/qemu"
	"barn.dev/lib/qmp"
	"barn.dev/lib/spec"
	"barn.dev/lib/vm"
	"barn.dev/lib/vmrecord"
)

var fakeBin string

func TestMain(m *testing.M) {
	if os.Getenv(mimicEnv) == "1" { // before the fake: a mimic's argv[0] is the fake's path
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	if fakeqemu.Invoked() {
		os.Exit(fakeqemu.Main(os.Args[1:]))
	}
	dir, err := os.MkdirTemp("", "fakeqemu-")
	if err != nil {
		panic(err)
	}
	if fakeBin, err = fakeqemu.Install(dir); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// fixture is one prepared node: files exist, invocation built.
type fixture struct {
	node string
	uuid string
	rt   vmrecord.Runtime
	inv  vmrecord.Invocation
	dir  string
}

func newFixture(t testing.TB, binary string) *fixture {
	t.Helper()
	dir := t.TempDir()
	rtDir := filepath.Join(dir, "rt")
	// A fresh VM UUID per fixture, as Barn gives every node: the process
	// table scan must never see another test's (or another checkout's) QEMU.
	f := &fixture{node: "n1", uuid: uuid.NewString(), dir: dir, rt: vmrecord.Runtime{
		Directory: rtDir, QMP: filepath.Join(rtDir, "qmp.sock"), BarnQMP: filepath.Join(rtDir, "barn-qmp.sock"),
		Pidfile: filepath.Join(rtDir, "qemu.pid"),
	}}
	base := filepath.Join(dir, "base.qcow2")
	root := filepath.Join(dir, "root.qcow2")
	seed := filepath.Join(dir, "seed.iso")
	for _, p := range []string{base, root, seed} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	inv, err := qemu.Invocation(qemu.Input{
		Node: spec.Node{Name: f.node, CPUs: 1, MemoryBytes: 512 << 20,
			MAC: spec.NICs{Management: "52:54:00:0a:0a:0b", Private: "52:54:00:0a:0a:0c"}},
		VMUUID: f.uuid, Image: imageref.Identity{Boot: "bios"},
		RootDisk: root, Base: base, Seed: seed, SSHPort: testport.Free(t), Runtime: f.rt,
		SerialLog: filepath.Join(dir, "serial.log"), QEMULog: filepath.Join(dir, "qemu.log"),
	}, qemu.Profile{Binary: binary, Accel: qemu.AccelTCG, Machine: "q35", CPU: "max", PrivateNet: qemu.PrivateNetNone})
	if err != nil {
		t.Fatal(err)
	}
	f.inv = inv
	return f
}

// target is f's node as recorded with tuple proc (nil: none recorded).
func (f *fixture) target(proc *vmrecord.Process) vm.Target {
	return vm.Target{Node: f.node, UUID: f.uuid, Runtime: f.rt, Invocation: f.inv, Process: proc}
}

func fakeEnv(mode string) []string {
	return append(os.Environ(), "FAKEQEMU_MODE="+mode, "FAKEQEMU_EXIT_DELAY=1s")
}

// launch starts the fake in mode and registers a verified kill as cleanup.
func (f *fixture) launch(t testing.TB, mode string) vmrecord.Process {
	t.Helper()
	proc, err := vm.LaunchWith(context.Background(), f.inv, f.node, f.uuid, f.rt, vm.LaunchOptions{Env: fakeEnv(mode)})
	if err != nil {
		t.Fatalf("launch (mode %q): %v", mode, err)
	}
	t.Cleanup(func() { killIfOurs(proc) })
	return proc
}

func killIfOurs(p vmrecord.Process) {
	if procid.Observe(p) == procid.Ours {
		syscall.Kill(p.PID, syscall.SIGKILL)
	}
}

// awaitDead waits, up to a minute, until procid proves p's process gone.
// A SIGKILLed QEMU is not gone at once: its main thread stays a zombie
// while its other threads are torn down, and Observe says Unknown in that
// window, not Dead, so "no longer Ours" is not yet a crash to audit.
func awaitDead(t *testing.T, p vmrecord.Process) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for v := procid.Observe(p); v != procid.Dead; v = procid.Observe(p) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d is still %s a minute after its crash", p.PID, v)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func quick() vm.StopOptions {
	// Waits end as soon as the process is gone; generous bounds keep a loaded
	// machine (or -race) from changing which ladder step is taken.
	return vm.StopOptions{Graceful: 700 * time.Millisecond, QuitWait: 10 * time.Second, TermWait: 10 * time.Second,
		KillWait: 5 * time.Second, QMPTimeout: 500 * time.Millisecond}
}

func steps(o *vm.StopOptions) *[]string {
	var log []string
	o.Progress = func(s string) { log = append(log, s) }
	return &log
}

func TestLaunchProvesIdentityAndTuple(t *testing.T) {
	f := newFixture(t, fakeBin)
	proc := f.launch(t, "")

	if proc.PID <= 0 || proc.Executable != fakeBin {
		t.Errorf("tuple pid %d exe %q, want exe %q", proc.PID, proc.Executable, fakeBin)
	}
	if proc.ArgvHash != procid.ArgvHash(f.inv) {
		t.Errorf("argv hash %s, want %s", proc.ArgvHash, procid.ArgvHash(f.inv))
	}
	if !strings.HasPrefix(proc.Started, "procstat:") || proc.Boot == "" {
		t.Errorf("started %q boot %q", proc.Started, proc.Boot)
	}
	if pid, err := vm.ReadPidfile(f.rt.Pidfile); err != nil || pid != proc.PID {
		t.Errorf("pidfile: %d, %v; want %d", pid, err, proc.PID)
	}
	if v := procid.Observe(proc); v != procid.Ours {
		t.Errorf("Observe = %s, want ours", v)
	}
	for _, sock := range f.rt.Sockets() { // the operators' monitor and Barn's own
		name, uuid, err := qmp.Identity(context.Background(), sock)
		if err != nil || name != f.node || uuid != f.uuid {
			t.Errorf("QMP identity on %s: %q %q %v", sock, name, uuid, err)
		}
	}
	serial, _ := os.ReadFile(filepath.Join(f.dir, "serial.log"))
	if !strings.Contains(string(serial), "n1") {
		t.Errorf("serial log %q", serial)
	}
	l := vm.Audit(context.Background(), f.target(&proc))
	if !l.Running || l.Runtime != vm.RuntimeRunning || l.QMP != nil || l.Verdict != procid.Ours || l.Status != "running" {
		t.Errorf("audit %+v", l)
	}
	// A second launch on the same runtime is refused: something answers.
	_, err := vm.LaunchWith(context.Background(), f.inv, f.node, f.uuid, f.rt, vm.LaunchOptions{Env: fakeEnv("")})
	if e := exitcode.As(err); e == nil || e.Class != exitcode.Conflict || e.Reason != "runtime_busy" {
		t.Errorf("second launch: %v, want conflict runtime_busy", err)
	}
}

func TestStopPowerdownHonoured(t *testing.T) {
	f := newFixture(t, fakeBin)
	proc := f.launch(t, "")
	o := quick()
	o.Graceful = 15 * time.Second
	log := steps(&o)
	if err := vm.Stop(context.Background(), f.target(&proc), o); err != nil {
		t.Fatal(err)
	}
	if v := procid.Observe(proc); v != procid.Dead {
		t.Errorf("after stop: %s", v)
	}
	if got := strings.Join(*log, "\n"); !strings.Contains(got, "system_powerdown") || strings.Contains(got, "quit") || strings.Contains(got, "SIG") {
		t.Errorf("ladder steps:\n%s", got)
	}
	assertNoRuntimeFiles(t, f.rt)
	l := vm.Audit(context.Background(), f.target(&proc))
	if l.Running || l.Runtime != vm.RuntimeInactive || !errors.Is(l.QMP, qmp.ErrUnavailable) {
		t.Errorf("audit after stop %+v", l)
	}
}

func TestStopPowerdownIgnoredThenQuit(t *testing.T) {
	f := newFixture(t, fakeBin)
	proc := f.launch(t, fakeqemu.IgnorePowerdown)
	o := quick()
	log := steps(&o)
	start := time.Now()
	if err := vm.Stop(context.Background(), f.target(&proc), o); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < o.Graceful {
		t.Errorf("stopped after %s, before the graceful wait %s ran out", time.Since(start), o.Graceful)
	}
	got := strings.Join(*log, "\n")
	if !strings.Contains(got, "QMP quit") || strings.Contains(got, "SIG") {
		t.Errorf("ladder steps:\n%s", got)
	}
	if v := procid.Observe(proc); v != procid.Dead {
		t.Errorf("after stop: %s", v)
	}
	assertNoRuntimeFiles(t, f.rt)
}

func TestLaunchWithSilentQMPIsCompensated(t *testing.T) {
	f := newFixture(t, fakeBin)
	_, err := vm.LaunchWith(context.Background(), f.inv, f.node, f.uuid, f.rt,
		vm.LaunchOptions{Env: fakeEnv(fakeqemu.HangQMP), QMPWait: 1500 * time.Millisecond, QMPTimeout: 300 * time.Millisecond})
	if e := exitcode.As(err); e == nil || e.Reason != "qmp_timeout" {
		t.Fatalf("launch with hung QMP: %v, want qmp_timeout", err)
	}
	if !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("error %q", err)
	}
	// Compensation signalled the verified pidfile process: nothing remains.
	assertNoRuntimeProcess(t, f.rt)
}

// TestStopBusyQMPSendsNothing: a monitor that accepts connections and
// stays silent (another client holds it) is busy, not absent: stop sends
// no signal and says so (conflict qmp_busy); the audit never calls it
// inactive.
func TestStopBusyQMPSendsNothing(t *testing.T) {
	f := newFixture(t, fakeBin)
	proc := startDirect(t, f, fakeqemu.HangQMP)
	o := quick()
	log := steps(&o)
	err := vm.Stop(context.Background(), f.target(&proc), o)
	if e := exitcode.As(err); e == nil || e.Class != exitcode.Conflict || e.Reason != "qmp_busy" || !errors.Is(err, qmp.ErrBusy) ||
		!strings.Contains(e.Next, "barn-node stop "+f.node) || !strings.Contains(e.Next, f.rt.BarnQMP) {
		t.Fatalf("stop with a busy monitor: %v, want conflict qmp_busy naming the socket", err)
	}
	if got := strings.Join(*log, "\n"); strings.Contains(got, "SIG") {
		t.Errorf("ladder steps:\n%s", got)
	}
	if v := procid.Observe(proc); v != procid.Ours {
		t.Fatalf("after a refused stop: %s, want still running", v)
	}
	l := vm.Audit(context.Background(), f.target(&proc))
	if !errors.Is(l.QMP, qmp.ErrBusy) || !l.Running || l.Runtime != vm.RuntimeUnknown {
		t.Errorf("audit of a busy monitor %+v", l)
	}
	if l := vm.Audit(context.Background(), f.target(nil)); l.Runtime == vm.RuntimeInactive {
		t.Errorf("audit of a busy monitor with no recorded process: %+v, never inactive", l)
	}
}

// TestStopFrozenUsesVerifiedSignals: a QEMU whose every thread is stopped
// (SIGSTOP) cannot answer any monitor; that, with its tuple Ours, is
// provable, so the ladder's verified signals apply: SIGTERM stays pending
// on a stopped process, and the re-captured SIGKILL ends it.
func TestStopFrozenUsesVerifiedSignals(t *testing.T) {
	f := newFixture(t, fakeBin)
	proc := startDirect(t, f, "")
	if err := syscall.Kill(proc.PID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for !procid.Frozen(proc.PID) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d is not stopped a minute after SIGSTOP", proc.PID)
		}
		time.Sleep(10 * time.Millisecond)
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
	assertNoRuntimeFiles(t, f.rt)
}

func TestStopEscalatesToSIGKILL(t *testing.T) {
	f := newFixture(t, fakeBin)
	proc := startDirect(t, f, fakeqemu.IgnoreTerm)
	removeSockets(t, f.rt) // QMP provably gone: signals only
	o := quick()
	o.TermWait = 500 * time.Millisecond
	log := steps(&o)
	if err := vm.Stop(context.Background(), f.target(&proc), o); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(*log, "\n"); !strings.Contains(got, "QMP unavailable") || !strings.Contains(got, "SIGTERM") || !strings.Contains(got, "SIGKILL") {
		t.Errorf("ladder steps:\n%s", got)
	}
	if v := procid.Observe(proc); v != procid.Dead {
		t.Errorf("after stop: %s", v)
	}
	assertNoRuntimeFiles(t, f.rt) // SIGKILL leaves them; Stop cleans the stale ones
}

func TestStopWrongUUIDSendsNothing(t *testing.T) {
	f := newFixture(t, fakeBin)
	_, err := vm.LaunchWith(context.Background(), f.inv, f.node, f.uuid, f.rt, vm.LaunchOptions{Env: fakeEnv(fakeqemu.WrongUUID)})
	if e := exitcode.As(err); e == nil || e.Class != exitcode.Integrity || e.Reason != "qmp_identity_mismatch" {
		t.Fatalf("launch wrong uuid: %v, want integrity qmp_identity_mismatch", err)
	}
	// Launch does not clean up a VM it cannot prove: it still runs.
	pid, err := vm.ReadPidfile(f.rt.Pidfile)
	if err != nil || !procid.Alive(pid) {
		t.Fatalf("wrong-uuid VM should be left alone: pid %d %v", pid, err)
	}
	proc, err := procid.Capture(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killIfOurs(proc) })

	o := quick()
	log := steps(&o)
	err = vm.Stop(context.Background(), f.target(&proc), o)
	if e := exitcode.As(err); e == nil || e.Class != exitcode.Integrity || e.Reason != "qmp_identity_mismatch" {
		t.Fatalf("stop wrong uuid: %v, want integrity", err)
	}
	if len(*log) != 0 {
		t.Errorf("stop sent something: %q", *log)
	}
	time.Sleep(300 * time.Millisecond)
	if v := procid.Observe(proc); v != procid.Ours {
		t.Errorf("wrong-uuid VM after refused stop: %s, want still running", v)
	}
	var st struct {
		Status string `json:"status"`
	}
	if err := (qmp.Monitor{Socket: f.rt.QMP}).Execute(context.Background(), "query-status", nil, &st); err != nil || st.Status != "running" {
		t.Errorf("QMP after refused stop: %q %v", st.Status, err)
	}
	l := vm.Audit(context.Background(), f.target(&proc))
	if l.Runtime != vm.RuntimeUnknown || !errors.Is(l.QMP, qmp.ErrIdentityMismatch) {
		t.Errorf("audit %+v", l)
	}
}

func TestStopForeignPIDIsStoppedAndNeverSignalled(t *testing.T) {
	f := newFixture(t, fakeBin)
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	boot, _ := procid.BootID()
	// The recorded tuple of a VM long gone, whose PID the sleep now has.
	recorded := vmrecord.Process{PID: sleep.Process.Pid, Executable: fakeBin, ExecutableFile: "1:1", Started: "procstat:1",
		ArgvHash: procid.ArgvHash(f.inv), Boot: boot}
	if v := procid.Observe(recorded); v != procid.Foreign {
		t.Fatalf("Observe = %s, want foreign", v)
	}
	o := quick()
	log := steps(&o)
	if err := vm.Stop(context.Background(), f.target(&recorded), o); err != nil {
		t.Fatalf("stop of a foreign PID: %v, want stopped", err)
	}
	if got := strings.Join(*log, "\n"); !strings.Contains(got, "not signalled") || strings.Contains(got, "SIGTERM") {
		t.Errorf("ladder steps:\n%s", got)
	}
	// Also a recorded tuple from another boot.
	other := recorded
	other.Started = "procstat:" + strings.TrimPrefix(mustCapture(t, sleep.Process.Pid).Started, "procstat:")
	other.Executable = mustCapture(t, sleep.Process.Pid).Executable
	other.Boot = "00000000-0000-0000-0000-000000000000"
	if v := procid.Observe(other); v != procid.Foreign {
		t.Errorf("other boot: %s, want foreign", v)
	}
	if err := vm.Stop(context.Background(), f.target(&other), o); err != nil {
		t.Errorf("stop other boot: %v", err)
	}
	time.Sleep(200 * time.Millisecond)
	if err := sleep.Process.Signal(syscall.Signal(0)); err != nil || !procid.Alive(sleep.Process.Pid) {
		t.Fatalf("the unrelated sleep did not survive: %v", err)
	}
	l := vm.Audit(context.Background(), f.target(&recorded))
	if l.Running || l.Runtime != vm.RuntimeInactive || l.Verdict != procid.Foreign {
		t.Errorf("audit %+v", l)
	}
}

func TestStopUnknownProcessBlocks(t *testing.T) {
	f := newFixture(t, fakeBin)
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	// Same start time and executable, other argv: ambiguous, never signalled.
	p := mustCapture(t, sleep.Process.Pid)
	p.ArgvHash = procid.ArgvHash(f.inv)
	err := vm.Stop(context.Background(), f.target(&p), quick())
	if e := exitcode.As(err); e == nil || e.Class != exitcode.Conflict || e.Reason != "process_unverified" {
		t.Fatalf("stop of an ambiguous process: %v, want conflict process_unverified", err)
	}
	if !procid.Alive(sleep.Process.Pid) {
		t.Fatal("ambiguous process was killed")
	}
}

func TestStopQMPOKButRecordedProcessOtherBlocks(t *testing.T) {
	f := newFixture(t, fakeBin)
	proc := f.launch(t, "")
	bad := proc
	bad.Started = "procstat:1"
	err := vm.Stop(context.Background(), f.target(&bad), quick())
	if e := exitcode.As(err); e == nil || e.Class != exitcode.Conflict || e.Reason != "process_mismatch" {
		t.Fatalf("stop: %v, want conflict process_mismatch", err)
	}
	if v := procid.Observe(proc); v != procid.Ours {
		t.Errorf("VM after refused stop: %s", v)
	}
}

func TestLaunchDieAtStartReturnsStderr(t *testing.T) {
	f := newFixture(t, fakeBin)
	_, err := vm.LaunchWith(context.Background(), f.inv, f.node, f.uuid, f.rt, vm.LaunchOptions{Env: fakeEnv(fakeqemu.DieAtStart)})
	e := exitcode.As(err)
	if e == nil || e.Class != exitcode.Runtime || e.Reason != "qemu_start_failed" || !strings.Contains(e.Message, "dying at start") {
		t.Fatalf("launch: %v, want runtime qemu_start_failed with the stderr tail", err)
	}
	assertNoRuntimeFiles(t, f.rt)
}

func TestLaunchDieAfterPidfileDetected(t *testing.T) {
	f := newFixture(t, fakeBin)
	start := time.Now()
	_, err := vm.LaunchWith(context.Background(), f.inv, f.node, f.uuid, f.rt, vm.LaunchOptions{Env: fakeEnv(fakeqemu.DieAfterPidfile)})
	e := exitcode.As(err)
	if e == nil || e.Reason != "qemu_start_failed" {
		t.Fatalf("launch: %v, want qemu_start_failed", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("early exit detected after %s; should not wait for the QMP timeout", time.Since(start))
	}
}

func TestLaunchMissingDiskFailsEarly(t *testing.T) {
	f := newFixture(t, fakeBin)
	os.Remove(filepath.Join(f.dir, "root.qcow2"))
	_, err := vm.LaunchWith(context.Background(), f.inv, f.node, f.uuid, f.rt, vm.LaunchOptions{Env: fakeEnv("")})
	if e := exitcode.As(err); e == nil || e.Reason != "qemu_start_failed" || !strings.Contains(e.Message, "root.qcow2") {
		t.Fatalf("launch: %v", err)
	}
}

func TestAuditCrashedVMIsInactive(t *testing.T) {
	f := newFixture(t, fakeBin)
	// Crash 3 s after ready: long enough for a loaded machine to prove the launch.
	proc, err := vm.LaunchWith(context.Background(), f.inv, f.node, f.uuid, f.rt,
		vm.LaunchOptions{Env: append(fakeEnv(fakeqemu.CrashAfter), "FAKEQEMU_EXIT_DELAY=3s")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killIfOurs(proc) })
	awaitDead(t, proc)
	l := vm.Audit(context.Background(), f.target(&proc))
	if l.Running || l.Runtime != vm.RuntimeInactive || l.Verdict != procid.Dead {
		t.Fatalf("audit after crash %+v", l)
	}
	// Stale socket and pidfile remain after a crash; Stop converges them.
	if _, err := os.Stat(f.rt.Pidfile); err != nil {
		t.Fatalf("crash should leave the pidfile: %v", err)
	}
	if err := vm.Stop(context.Background(), f.target(&proc), quick()); err != nil {
		t.Fatal(err)
	}
	assertNoRuntimeFiles(t, f.rt)
}

func TestStopExitLateWaitsBounded(t *testing.T) {
	f := newFixture(t, fakeBin)
	proc := f.launch(t, fakeqemu.ExitLate) // exits 1 s after powerdown
	o := quick()
	o.Graceful = 10 * time.Second
	log := steps(&o)
	start := time.Now()
	if err := vm.Stop(context.Background(), f.target(&proc), o); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 900*time.Millisecond || d > 8*time.Second {
		t.Errorf("stop took %s, want about the 1 s exit delay", d)
	}
	if got := strings.Join(*log, "\n"); strings.Contains(got, "quit") {
		t.Errorf("ladder steps:\n%s", got)
	}
}

func TestStopCancelled(t *testing.T) {
	f := newFixture(t, fakeBin)
	proc := f.launch(t, fakeqemu.IgnorePowerdown)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	o := quick()
	o.Graceful = time.Minute
	err := vm.Stop(ctx, f.target(&proc), o)
	if exitcode.ClassOf(err) != exitcode.Cancelled {
		t.Fatalf("stop under a cancelled ctx: %v, want cancelled", err)
	}
	if v := procid.Observe(proc); v != procid.Ours {
		t.Errorf("VM after cancelled stop: %s", v)
	}
}

// startDirect runs the fake without Launch's QMP proof (for hung-QMP
// modes) and returns its captured tuple.
func startDirect(t *testing.T, f *fixture, mode string) vmrecord.Process {
	t.Helper()
	if err := os.MkdirAll(f.rt.Directory, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(f.inv.Binary, f.inv.Args...)
	cmd.Env = fakeEnv(mode)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fake: %v: %s", err, out)
	}
	pid, err := vm.ReadPidfile(f.rt.Pidfile)
	if err != nil {
		t.Fatal(err)
	}
	p := mustCapture(t, pid)
	if p.ArgvHash != procid.ArgvHash(f.inv) {
		t.Fatalf("daemon argv hash %s, want %s", p.ArgvHash, procid.ArgvHash(f.inv))
	}
	t.Cleanup(func() { killIfOurs(p) })
	return p
}

func mustCapture(t testing.TB, pid int) vmrecord.Process {
	t.Helper()
	p, err := procid.Capture(pid)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func assertNoRuntimeFiles(t *testing.T, rt vmrecord.Runtime) {
	t.Helper()
	for _, p := range append(rt.Sockets(), rt.Pidfile) {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s remains (%v)", p, err)
		}
	}
}

// removeSockets deletes rt's QMP sockets, as a damaged runtime directory
// would: nothing can reach QEMU's monitors any more.
func removeSockets(t *testing.T, rt vmrecord.Runtime) {
	t.Helper()
	for _, sock := range rt.Sockets() {
		if err := os.Remove(sock); err != nil {
			t.Fatal(err)
		}
	}
}

func assertNoRuntimeProcess(t *testing.T, rt vmrecord.Runtime) {
	t.Helper()
	pid, err := vm.ReadPidfile(rt.Pidfile)
	if err == nil && procid.Alive(pid) {
		t.Errorf("pid %d from %s still alive", pid, rt.Pidfile)
	}
}

func TestLaunchReplacesPidfileOfReusedPID(t *testing.T) {
	f := newFixture(t, fakeBin)
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	os.MkdirAll(f.rt.Directory, 0o700)
	os.WriteFile(f.rt.Pidfile, []byte(strconv.Itoa(sleep.Process.Pid)+"\n"), 0o600)
	proc := f.launch(t, "")
	if proc.PID == sleep.Process.Pid || !procid.Alive(sleep.Process.Pid) {
		t.Fatalf("launch over a stale pidfile: pid %d, sleep alive %v", proc.PID, procid.Alive(sleep.Process.Pid))
	}
}

func TestLaunchRefusesPidfileOfLiveQEMU(t *testing.T) {
	f := newFixture(t, fakeBin)
	proc := startDirect(t, f, fakeqemu.HangQMP)
	_, err := vm.LaunchWith(context.Background(), f.inv, f.node, f.uuid, f.rt, vm.LaunchOptions{Env: fakeEnv("")})
	if e := exitcode.As(err); e == nil || e.Class != exitcode.Conflict || e.Reason != "runtime_busy" {
		t.Fatalf("launch over a live VM: %v", err)
	}
	if procid.Observe(proc) != procid.Ours {
		t.Fatal("live VM disturbed")
	}
}

// TestLaunchRequiresAPrivateRuntimeDir: the runtime directory holds the
// QMP sockets that control the VM and the pidfile that names what Barn
// may signal, so, like the state root, it must be 0700 and the user's.
func TestLaunchRequiresAPrivateRuntimeDir(t *testing.T) {
	f := newFixture(t, fakeBin)
	if err := os.MkdirAll(f.rt.Directory, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(f.rt.Directory, 0o755)
	_, err := vm.LaunchWith(context.Background(), f.inv, f.node, f.uuid, f.rt, vm.LaunchOptions{Env: fakeEnv("")})
	if e := exitcode.As(err); e == nil || e.Class != exitcode.Integrity || e.Reason != "runtime_dir" || e.Next != "chmod 0700 "+f.rt.Directory {
		t.Fatalf("launch in a 0755 runtime directory: %v, want integrity runtime_dir with a chmod hint", err)
	}
	assertNoRuntimeProcess(t, f.rt)

	other := newFixture(t, fakeBin)
	if os.Geteuid() == 0 {
		if err := os.MkdirAll(other.rt.Directory, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(other.rt.Directory, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	} else { // a directory that exists, is 0700 and is root's
		other.rt.Directory = "/root"
	}
	_, err = vm.LaunchWith(context.Background(), other.inv, other.node, other.uuid, other.rt, vm.LaunchOptions{Env: fakeEnv("")})
	if e := exitcode.As(err); e == nil || e.Class != exitcode.Integrity || e.Reason != "runtime_dir" || !strings.Contains(e.Message, "owned by uid") {
		t.Fatalf("launch in another user's runtime directory: %v, want integrity runtime_dir", err)
	}

	if err := os.Chmod(f.rt.Directory, 0o700); err != nil {
		t.Fatal(err)
	}
	f.launch(t, "")
}

// TestIncompleteTupleIsNeverActedOn: a tuple without the executable's
// file (Capture always records it; only a development build before the
// first release wrote such tuples) proves nothing, even while QMP proves
// the VM's identity: audit reports the pid unknown and stop refuses
// without signalling; the complete tuple then stops the VM.
func TestIncompleteTupleIsNeverActedOn(t *testing.T) {
	f := newFixture(t, fakeBin)
	proc := f.launch(t, "")
	old := proc
	old.ExecutableFile = ""
	if v := procid.Observe(old); v != procid.Unknown {
		t.Fatalf("Observe of the incomplete tuple = %s, want unknown", v)
	}
	if l := vm.Audit(context.Background(), f.target(&old)); l.Verdict != procid.Unknown || l.Runtime == vm.RuntimeInactive {
		t.Fatalf("audit with an incomplete tuple: %+v", l)
	}
	o := quick()
	o.Graceful = 15 * time.Second
	err := vm.Stop(context.Background(), f.target(&old), o)
	if e := exitcode.As(err); e == nil || e.Reason != "process_mismatch" {
		t.Fatalf("stop with an incomplete tuple: %v, want process_mismatch", err)
	}
	if v := procid.Observe(proc); v != procid.Ours {
		t.Fatalf("after the refused stop: %s, want the VM still running", v)
	}
	if err := vm.Stop(context.Background(), f.target(&proc), o); err != nil {
		t.Fatalf("stop with the complete tuple: %v", err)
	}
	if v := procid.Observe(proc); v != procid.Dead {
		t.Errorf("after stop: %s", v)
	}
}
