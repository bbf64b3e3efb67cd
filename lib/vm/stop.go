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
// tuple is proc (nil when none was recorded, e.g. an interrupted start):
//
//  1. QMP identity: a mismatch is an integrity error (reason
//     "qmp_identity_mismatch") and nothing is sent; unavailable → step 5.
//  2. The recorded process must be Ours (QMP ok + other process → conflict
//     "process_mismatch").
//  3. system_powerdown, wait up to o.Graceful.
//  4. Re-verify QMP and process, QMP quit, wait o.QuitWait.
//  5. Only with QMP proven unavailable: Observe(proc) — Dead or Foreign is
//     stopped (a Foreign PID is never signalled), Unknown is a conflict
//     "process_unverified"; Ours gets SIGTERM (through a pidfd opened before
//     the check), wait o.TermWait, re-capture and match, SIGKILL, wait
//     o.KillWait.
//
// It returns nil once the VM is proven stopped, and then removes the stale
// runtime socket and pidfile. A still-answering, matching QMP after quit is
// a runtime error "stop_failed": no signal bypasses a live control plane.
func Stop(ctx context.Context, node, vmUUID string, rt state.Runtime, proc *state.Process, o StopOptions) error {
	o = o.withDefaults()
	m := qmp.Monitor{Socket: rt.QMP, Timeout: o.QMPTimeout}

	qerr := m.Verify(ctx, node, vmUUID)
	switch {
	case ctx.Err() != nil || errors.Is(qerr, context.DeadlineExceeded) || errors.Is(qerr, context.Canceled):
		return exitcode.Wrap(exitcode.Cancelled, ctx.Err(), "stopping %s", node)
	case errors.Is(qerr, qmp.ErrIdentityMismatch):
		return mismatch(node, qerr)
	case errors.Is(qerr, qmp.ErrUnavailable):
		o.Progress(fmt.Sprintf("%s: QMP unavailable (%v); verifying the recorded process", node, qerr))
		return signalPath(ctx, node, rt, proc, o)
	case qerr != nil:
		return exitcode.Wrap(exitcode.Runtime, qerr, "QMP of %s answers but failed; not bypassing it with signals", node).
			WithReason("qmp_error").WithNext("barn-node status " + node)
	}
	if err := checkOurs(node, proc); err != nil {
		return err
	}

	o.Progress(fmt.Sprintf("%s: system_powerdown; waiting up to %s for the guest", node, o.Graceful))
	if err := m.Powerdown(ctx); err != nil && !errors.Is(err, qmp.ErrUnavailable) {
		return exitcode.Wrap(exitcode.ClassOf(ctxOr(ctx, err)), err, "stopping %s", node).WithReason("qmp_error")
	}
	if waitGone(ctx, proc, m, o.Graceful, o.Poll) {
		return finish(ctx, node, rt)
	}
	if ctx.Err() != nil {
		return exitcode.Wrap(exitcode.Cancelled, ctx.Err(), "stopping %s", node)
	}

	o.Progress(fmt.Sprintf("%s: guest did not power off within %s; QMP quit", node, o.Graceful))
	qerr = m.Verify(ctx, node, vmUUID)
	switch {
	case errors.Is(qerr, qmp.ErrIdentityMismatch):
		return mismatch(node, qerr)
	case errors.Is(qerr, qmp.ErrUnavailable):
		return signalPath(ctx, node, rt, proc, o)
	case qerr != nil:
		return exitcode.Wrap(exitcode.ClassOf(ctxOr(ctx, qerr)), qerr, "re-verifying %s before quit", node).WithReason("qmp_error")
	}
	if err := checkOurs(node, proc); err != nil {
		return err
	}
	if err := m.Quit(ctx); err != nil && !errors.Is(err, qmp.ErrUnavailable) {
		return exitcode.Wrap(exitcode.ClassOf(ctxOr(ctx, err)), err, "QMP quit of %s", node).WithReason("qmp_error")
	}
	if waitGone(ctx, proc, m, o.QuitWait, o.Poll) {
		return finish(ctx, node, rt)
	}
	if ctx.Err() != nil {
		return exitcode.Wrap(exitcode.Cancelled, ctx.Err(), "stopping %s", node)
	}
	if qerr := m.Verify(ctx, node, vmUUID); !errors.Is(qerr, qmp.ErrUnavailable) {
		// Stopping again would end here again: the one action left is the
		// user's.
		return exitcode.New(exitcode.Runtime, "%s still runs %s after QMP quit and its QMP still answers; no signal sent", node, o.QuitWait).
			WithReason("stop_failed").WithNext(fmt.Sprintf("kill -9 %d once you have checked it is %s's QEMU (ps -o args= -p %d), then barn-node status %s", proc.PID, node, proc.PID, node))
	}
	o.Progress(fmt.Sprintf("%s: QMP gone but the process remains; verified signals", node))
	return signalPath(ctx, node, rt, proc, o)
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
			node, proc.PID, v).WithReason("process_mismatch").
			WithNext(fmt.Sprintf("stop %s's QEMU yourself (QMP proves it; recorded pid %d is not it), then barn-node status %s", node, proc.PID, node))
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
	// A killed multi-threaded QEMU can show as a zombie (Dead) a moment
	// before its last thread exits and its sockets close: allow it a short,
	// bounded grace before calling the socket busy.
	err := CleanupRuntime(ctx, rt)
	for i := 0; err != nil && i < 40 && sleep(ctx, 50*time.Millisecond); i++ {
		err = CleanupRuntime(ctx, rt)
	}
	if err != nil {
		return exitcode.Wrap(exitcode.ClassOf(err), err, "%s stopped, but its runtime files remain", node).
			WithReason("runtime_cleanup")
	}
	return nil
}

// CleanupRuntime removes a stale QMP socket and pidfile of rt. It refuses
// (conflict "runtime_busy") to unlink a socket something listens on (250 ms
// dial) or a pidfile naming a live process; it never removes the directory.
func CleanupRuntime(ctx context.Context, rt state.Runtime) error {
	if fi, err := os.Lstat(rt.QMP); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return exitcode.New(exitcode.Conflict, "%s exists and is not a socket; not removing it", rt.QMP).WithReason("runtime_busy")
		}
		if socketListening(rt.QMP) {
			// status would come back here: the listener is the user's to
			// identify.
			return exitcode.New(exitcode.Conflict, "something listens on QMP socket %s; not removing it", rt.QMP).
				WithReason("runtime_busy").WithNext("stop what listens on " + rt.QMP + " (ss -xlp | grep " + rt.QMP + ") if it is a leftover QEMU, then barn-node status")
		}
		if err := os.Remove(rt.QMP); err != nil && !errors.Is(err, os.ErrNotExist) {
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
				WithReason("runtime_busy").WithNext(fmt.Sprintf("stop pid %d if it is a leftover QEMU (ps -o args= -p %d), then barn-node status", pid, pid))
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
