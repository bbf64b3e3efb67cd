package vm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/procid"
	"barn.dev/lib/qmp"
	"barn.dev/lib/state"
)

// StopOptions tunes Stop. Zero durations mean the reference defaults.
type StopOptions struct {
	Graceful   time.Duration // system_powerdown → exit; default 2 min
	Progress   func(string)  // one line per ladder step; nil discards
	QuitWait   time.Duration // default 10 s
	TermWait   time.Duration // default 10 s
	KillWait   time.Duration // default 5 s
	QMPTimeout time.Duration // one QMP operation; default 5 s
	Poll       time.Duration // default 100 ms
}

func (o StopOptions) withDefaults() StopOptions {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.Graceful, DefaultGraceful)
	def(&o.QuitWait, DefaultQuitWait)
	def(&o.TermWait, DefaultTermWait)
	def(&o.KillWait, DefaultKillWait)
	def(&o.QMPTimeout, qmp.DefaultTimeout)
	def(&o.Poll, DefaultPoll)
	if o.Progress == nil {
		o.Progress = func(string) {}
	}
	return o
}

// Stop runs the stop ladder for the VM node/vmUUID whose recorded process
// tuple is proc (nil when none was recorded, e.g. an interrupted start).
// Every QMP step is one session (lib/qmp): the identity is proven on the
// connection the command is then sent on.
//
//  1. QMP identity: a mismatch is an integrity error (reason
//     "qmp_identity_mismatch") and nothing is sent; unavailable → step 5;
//     busy → step 6.
//  2. The recorded process must be Ours (QMP ok + other process → conflict
//     "process_mismatch").
//  3. system_powerdown, wait up to o.Graceful.
//  4. Re-verify QMP and process, QMP quit, wait o.QuitWait.
//  5. Only with QMP proven unavailable: Observe(proc) — Dead or Foreign is
//     stopped (a Foreign PID is never signalled), Unknown is a conflict
//     "process_unverified"; Ours gets SIGTERM (through a pidfd opened before
//     the check), wait o.TermWait, re-capture and match, SIGKILL, wait
//     o.KillWait.
//  6. QMP busy (something listens but stays silent: another client holds
//     the monitor) is never read as absence: conflict "qmp_busy", nothing
//     sent. The one exception is a recorded process proven Ours whose
//     every thread is stopped (SIGSTOP, a debugger): it cannot answer any
//     monitor until continued, so step 5's verified signals apply.
//
// It returns nil once the VM is proven stopped, and then removes the stale
// runtime socket and pidfile. A still-answering, matching QMP after quit is
// a runtime error "stop_failed": no signal bypasses a live control plane.
func Stop(ctx context.Context, node, vmUUID string, rt state.Runtime, proc *state.Process, o StopOptions) error {
	o = o.withDefaults()
	m := qmp.Monitor{Socket: rt.BarnMonitor(), Timeout: o.QMPTimeout}

	s, err := verifiedSession(ctx, m, node, vmUUID, proc)
	if err != nil {
		return qmpFailed(ctx, node, rt, proc, o, err)
	}
	o.Progress(fmt.Sprintf("%s: system_powerdown; waiting up to %s for the guest", node, o.Graceful))
	err = s.Execute("system_powerdown", nil, nil)
	s.Close()
	if err != nil && !errors.Is(err, qmp.ErrUnavailable) {
		return qmpFailed(ctx, node, rt, proc, o, err)
	}
	if waitGone(ctx, proc, m, o.Graceful, o.Poll) {
		return finish(ctx, node, rt)
	}
	if ctx.Err() != nil {
		return exitcode.Wrap(exitcode.Cancelled, ctx.Err(), "stopping %s", node)
	}

	o.Progress(fmt.Sprintf("%s: guest did not power off within %s; QMP quit", node, o.Graceful))
	if s, err = verifiedSession(ctx, m, node, vmUUID, proc); err != nil {
		return qmpFailed(ctx, node, rt, proc, o, err)
	}
	err = s.Execute("quit", nil, nil)
	s.Close()
	if err != nil && !errors.Is(err, qmp.ErrUnavailable) {
		return qmpFailed(ctx, node, rt, proc, o, err)
	}
	if waitGone(ctx, proc, m, o.QuitWait, o.Poll) {
		return finish(ctx, node, rt)
	}
	if ctx.Err() != nil {
		return exitcode.Wrap(exitcode.Cancelled, ctx.Err(), "stopping %s", node)
	}
	if qerr := m.Verify(ctx, node, vmUUID); !errors.Is(qerr, qmp.ErrUnavailable) {
		return exitcode.New(exitcode.Runtime, "%s still runs %s after QMP quit and its QMP still answers; no signal sent", node, o.QuitWait).
			WithReason("stop_failed").WithNext("barn-node stop " + node)
	}
	o.Progress(fmt.Sprintf("%s: QMP gone but the process remains; verified signals", node))
	return signalPath(ctx, node, rt, proc, o)
}

// verifiedSession opens one QMP session, proves on it that QEMU answers as
// node/vmUUID and checks that the recorded process (if any) is Ours; the
// caller sends its command on that same session and closes it.
func verifiedSession(ctx context.Context, m qmp.Monitor, node, vmUUID string, proc *state.Process) (*qmp.Session, error) {
	s, err := m.Open(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.Verify(node, vmUUID); err != nil {
		s.Close()
		return nil, err
	}
	if err := checkOurs(node, proc); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// qmpFailed turns a failed QMP step of the ladder into the next step or
// the error that ends it.
func qmpFailed(ctx context.Context, node string, rt state.Runtime, proc *state.Process, o StopOptions, err error) error {
	var ee *exitcode.Error
	switch {
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return exitcode.Wrap(exitcode.Cancelled, ctxOr(ctx, err), "stopping %s", node)
	case errors.Is(err, qmp.ErrIdentityMismatch):
		return mismatch(node, err)
	case errors.As(err, &ee):
		return err // the recorded process does not match
	case errors.Is(err, qmp.ErrUnavailable):
		o.Progress(fmt.Sprintf("%s: QMP unavailable (%v); verifying the recorded process", node, err))
		return signalPath(ctx, node, rt, proc, o)
	case errors.Is(err, qmp.ErrBusy):
		return busyPath(ctx, node, rt, proc, o, err)
	}
	return exitcode.Wrap(exitcode.Runtime, err, "QMP of %s answers but failed; not bypassing it with signals", node).
		WithReason("qmp_error").WithNext("barn-node status " + node)
}

// busyPath is step 6: something holds QMP open without answering.
func busyPath(ctx context.Context, node string, rt state.Runtime, proc *state.Process, o StopOptions, qerr error) error {
	if proc != nil && procid.Observe(*proc) == procid.Ours && procid.Frozen(proc.PID) {
		o.Progress(fmt.Sprintf("%s: QMP is silent because pid %d is stopped (SIGSTOP or a debugger) and cannot answer; verified signals", node, proc.PID))
		if err := signalLadder(ctx, *proc, o); err != nil {
			return err
		}
		return finish(ctx, node, rt)
	}
	return QMPBusy(node, qerr)
}

// QMPBusy is the error of an operation refused because node's QMP monitor
// is held by another client (conflict "qmp_busy"; nothing was sent).
func QMPBusy(node string, qerr error) error {
	sock := ""
	var be *qmp.BusyError
	if errors.As(qerr, &be) {
		sock = be.Socket
	}
	return exitcode.Wrap(exitcode.Conflict, qerr,
		"%s: its QMP monitor is held by another client or not answering; a busy monitor is not an absent QEMU, so nothing was sent", node).
		WithReason("qmp_busy").
		WithNext(fmt.Sprintf("close the other client of %s (find it: ss -xp | grep %s), then barn-node stop %s", sock, sock, node))
}

func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// checkOurs requires the recorded process (when there is one) to be Ours
// while QMP proves the identity.
func checkOurs(node string, proc *state.Process) error {
	if proc == nil {
		return nil
	}
	if v := procid.Observe(*proc); v != procid.Ours {
		return exitcode.New(exitcode.Conflict,
			"QMP of %s proves the VM runs, but recorded pid %d is %s; refusing to act on a process that does not match",
			node, proc.PID, v).WithReason("process_mismatch").WithNext("barn-node recreate --force " + node)
	}
	return nil
}

// signalPath is step 5: QMP is proven unavailable.
func signalPath(ctx context.Context, node string, rt state.Runtime, proc *state.Process, o StopOptions) error {
	if proc == nil {
		pid, err := ReadPidfile(rt.Pidfile)
		if errors.Is(err, os.ErrNotExist) || (err == nil && !procid.Alive(pid)) {
			return finish(ctx, node, rt)
		}
		return exitcode.New(exitcode.Conflict,
			"QMP of %s is unavailable, no process identity is recorded and pidfile %s names a live or unreadable process",
			node, rt.Pidfile).WithReason("process_unverified").WithNext("barn-node status " + node)
	}
	switch v := procid.Observe(*proc); v {
	case procid.Dead:
		return finish(ctx, node, rt)
	case procid.Foreign:
		o.Progress(fmt.Sprintf("%s: recorded pid %d now belongs to an unrelated process; treating the VM as stopped (not signalled)", node, proc.PID))
		return finish(ctx, node, rt)
	case procid.Unknown:
		return exitcode.New(exitcode.Conflict,
			"QMP of %s is unavailable and the identity of recorded pid %d cannot be verified; no signal sent", node, proc.PID).
			WithReason("process_unverified").WithNext("barn-node status " + node)
	}
	if err := signalLadder(ctx, *proc, o); err != nil {
		return err
	}
	return finish(ctx, node, rt)
}

// signalLadder sends verified SIGTERM then, after re-capturing, SIGKILL.
func signalLadder(ctx context.Context, proc state.Process, o StopOptions) error {
	o = o.withDefaults()
	o.Progress(fmt.Sprintf("pid %d: identity verified; SIGTERM, waiting up to %s", proc.PID, o.TermWait))
	sent, err := verifiedSignal(proc, unix.SIGTERM)
	if err != nil {
		return err
	}
	if !sent || waitGone(ctx, &proc, qmp.Monitor{}, o.TermWait, o.Poll) {
		return nil
	}
	if ctx.Err() != nil {
		return exitcode.Wrap(exitcode.Cancelled, ctx.Err(), "stopping pid %d", proc.PID)
	}
	o.Progress(fmt.Sprintf("pid %d: still alive after SIGTERM; re-captured identity, SIGKILL", proc.PID))
	if sent, err = verifiedSignal(proc, unix.SIGKILL); err != nil {
		return err
	}
	if !sent || waitGone(ctx, &proc, qmp.Monitor{}, o.KillWait, o.Poll) {
		return nil
	}
	return exitcode.New(exitcode.Runtime, "pid %d survived SIGKILL for %s", proc.PID, o.KillWait).WithReason("stop_failed").
		WithNext("barn-node status")
}

// verifiedSignal pins the process with a pidfd, re-captures its tuple and
// sends sig only when it is still Ours. sent is false when the process
// turned out Dead or Foreign (stopped; nothing sent).
func verifiedSignal(proc state.Process, sig unix.Signal) (sent bool, err error) {
	fd, ferr := unix.PidfdOpen(proc.PID, 0)
	if ferr == nil {
		defer unix.Close(fd)
	} else if errors.Is(ferr, unix.ESRCH) {
		return false, nil
	}
	switch v := procid.Observe(proc); v {
	case procid.Dead, procid.Foreign:
		return false, nil
	case procid.Unknown:
		return false, exitcode.New(exitcode.Conflict, "identity of pid %d cannot be verified before %s; no signal sent", proc.PID, sig).
			WithReason("process_unverified")
	}
	if ferr == nil {
		err = unix.PidfdSendSignal(fd, sig, nil, 0)
	} else {
		err = unix.Kill(proc.PID, sig) // no pidfd (kernel < 5.3): checked just above
	}
	if errors.Is(err, unix.ESRCH) {
		return false, nil
	}
	if err != nil {
		return false, exitcode.Wrap(exitcode.Runtime, err, "sending %s to pid %d", sig, proc.PID).WithReason("signal_failed")
	}
	return true, nil
}

// waitGone polls every poll for up to d until the VM is gone: proc (when
// known) is Dead or Foreign, else QMP no longer answers. It reports whether
// it went away.
func waitGone(ctx context.Context, proc *state.Process, m qmp.Monitor, d, poll time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if proc != nil {
			if v := procid.Observe(*proc); v == procid.Dead || v == procid.Foreign {
				return true
			}
		} else if m.Socket != "" && !socketListening(m.Socket) {
			return true
		}
		if time.Now().After(deadline) || !sleep(ctx, poll) {
			return false
		}
	}
}

func finish(ctx context.Context, node string, rt state.Runtime) error {
	if err := cleanupSettled(ctx, rt); err != nil {
		return exitcode.Wrap(exitcode.ClassOf(err), err, "%s stopped, but its runtime files remain", node).
			WithReason("runtime_cleanup")
	}
	return nil
}

// cleanupSettled is CleanupRuntime with a short, bounded grace (2 s) for
// a QEMU that is going away: a killed multi-threaded QEMU can show as a
// zombie (Dead) a moment before its last thread exits, and a QEMU that
// failed at startup closes its monitors one by one as it exits.
func cleanupSettled(ctx context.Context, rt state.Runtime) error {
	err := CleanupRuntime(ctx, rt)
	for i := 0; err != nil && i < 40 && sleep(ctx, 50*time.Millisecond); i++ {
		err = CleanupRuntime(ctx, rt)
	}
	return err
}

// CleanupRuntime removes the stale QMP sockets (the operators' and Barn's
// own) and pidfile of rt. It refuses (conflict "runtime_busy") to unlink a
// socket something listens on (250 ms dial) or a pidfile naming a live
// process; it never removes the directory.
func CleanupRuntime(ctx context.Context, rt state.Runtime) error {
	for _, sock := range rt.Sockets() {
		fi, err := os.Lstat(sock)
		if err != nil {
			continue
		}
		if fi.Mode().Type() != os.ModeSocket {
			return exitcode.New(exitcode.Conflict, "%s exists and is not a socket; not removing it", sock).WithReason("runtime_busy")
		}
		if socketListening(sock) {
			return exitcode.New(exitcode.Conflict, "something listens on QMP socket %s; not removing it", sock).
				WithReason("runtime_busy").WithNext("barn-node status")
		}
		if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
			return exitcode.Wrap(exitcode.Runtime, err, "removing stale QMP socket")
		}
	}
	if _, err := os.Lstat(rt.Pidfile); err == nil {
		pid, err := ReadPidfile(rt.Pidfile)
		if err != nil {
			return exitcode.Wrap(exitcode.Conflict, err, "not removing pidfile").WithReason("runtime_busy")
		}
		if procid.Alive(pid) && !foreignToPidfile(pid, rt.Pidfile) {
			return exitcode.New(exitcode.Conflict, "pidfile %s names live pid %d; not removing it", rt.Pidfile, pid).
				WithReason("runtime_busy").WithNext("barn-node status")
		}
		if err := os.Remove(rt.Pidfile); err != nil && !errors.Is(err, os.ErrNotExist) {
			return exitcode.Wrap(exitcode.Runtime, err, "removing stale pidfile")
		}
	}
	return nil
}

// foreignToPidfile reports whether live pid provably did not write path:
// its readable argv lacks "-pidfile <path>" (the PID was reused by an
// unrelated process). An unreadable argv proves nothing.
func foreignToPidfile(pid int, path string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return false
	}
	return !bytes.Contains(append([]byte{0}, b...), []byte("\x00-pidfile\x00"+path+"\x00"))
}

// socketListening reports whether a unix socket accepts connections (250 ms).
func socketListening(path string) bool {
	c, err := net.DialTimeout("unix", path, 250*time.Millisecond)
	if err != nil {
		return !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ECONNREFUSED) && isTimeoutErr(err)
	}
	c.Close()
	return true
}

func isTimeoutErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
