package vm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/procid"
	"barn.dev/lib/qmp"
	"barn.dev/lib/vmrecord"
)

// StopOptions tunes Stop. Zero durations mean the reference defaults.
// Each wait on a known process may run up to ExitWait past its own
// duration while the process provably ends (waitGone).
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

// Stop runs the stop ladder for t (t.Process nil when no tuple was
// recorded, e.g. an interrupted start). Every QMP step is one session on
// Barn's own monitor (lib/qmp): the identity is proven on the connection
// the command is then sent on.
//
//  1. QMP identity: a mismatch is an integrity error (reason
//     "qmp_identity_mismatch") and nothing is sent; unavailable → step 5;
//     busy → step 6.
//  2. The recorded process must be Ours (QMP ok + other process → conflict
//     "process_mismatch").
//  3. system_powerdown, wait up to o.Graceful for the VM to be gone: the
//     recorded process Dead or Foreign, or, with none recorded, Barn's
//     monitor silent and no process claiming t in the process table (a
//     socket that vanishes mid-wait is no proof).
//  4. Re-verify QMP and process, QMP quit, wait o.QuitWait the same way.
//  5. Only with QMP proven unavailable: the process to signal is the
//     recorded tuple when Observe says Ours (Unknown is a conflict
//     "process_unverified"); when it is Dead or Foreign (never signalled)
//     or none was recorded, the process table decides (procid.Find): the
//     one process running t.Invocation exactly is adopted, no claimant at
//     all means stopped, anything else is "process_unverified". A missing
//     pidfile proves nothing. The chosen process gets SIGTERM (through a
//     pidfd opened before the check), wait o.TermWait, re-capture and
//     match, SIGKILL, wait o.KillWait.
//  6. QMP busy (something listens but stays silent: another client holds
//     the monitor) is never read as absence: conflict "qmp_busy", nothing
//     sent. The one exception is a recorded process proven Ours whose
//     every thread is stopped (SIGSTOP, a debugger): it cannot answer any
//     monitor until continued, so step 5's verified signals apply.
//
// Every wait on a known process runs up to ExitWait longer while that
// process provably ends (waitGone): a large guest's teardown.
//
// It returns nil once the VM is proven stopped, and then removes the stale
// runtime sockets and pidfile. A still-answering, matching QMP after quit
// is a runtime error "stop_failed": no signal bypasses a live control plane.
func Stop(ctx context.Context, t Target, o StopOptions) error {
	o = o.withDefaults()
	m := qmp.Monitor{Socket: t.Runtime.BarnQMP, Timeout: o.QMPTimeout}
	node, proc := t.Node, t.Process

	s, err := verifiedSession(ctx, m, t)
	if err != nil {
		return qmpFailed(ctx, t, o, err)
	}
	o.Progress(fmt.Sprintf("%s: system_powerdown; waiting up to %s for the guest (longer while QEMU is ending)", node, o.Graceful))
	err = s.Execute("system_powerdown", nil, nil)
	s.Close()
	if err != nil && !errors.Is(err, qmp.ErrUnavailable) {
		return qmpFailed(ctx, t, o, err)
	}
	start := time.Now()
	if waitGone(ctx, t.gone(proc), o.Graceful, o.Poll) {
		return finish(ctx, node, t.Runtime)
	}
	if ctx.Err() != nil {
		return exitcode.Wrap(exitcode.Cancelled, ctx.Err(), "stopping %s", node)
	}

	o.Progress(fmt.Sprintf("%s: guest did not power off within %s; QMP quit", node, since(start)))
	if s, err = verifiedSession(ctx, m, t); err != nil {
		return qmpFailed(ctx, t, o, err)
	}
	err = s.Execute("quit", nil, nil)
	s.Close()
	if err != nil && !errors.Is(err, qmp.ErrUnavailable) {
		return qmpFailed(ctx, t, o, err)
	}
	start = time.Now()
	if waitGone(ctx, t.gone(proc), o.QuitWait, o.Poll) {
		return finish(ctx, node, t.Runtime)
	}
	if ctx.Err() != nil {
		return exitcode.Wrap(exitcode.Cancelled, ctx.Err(), "stopping %s", node)
	}
	if qerr := m.Verify(ctx, node, t.UUID); !errors.Is(qerr, qmp.ErrUnavailable) {
		// Stopping again would end here again: the one action left is the
		// user's.
		next := fmt.Sprintf("stop %s's QEMU yourself (its QMP at %s still answers), then barn-node status %s", node, t.Runtime.QMP, node)
		if proc != nil {
			next = fmt.Sprintf("kill -9 %d once you have checked it is %s's QEMU (ps -o args= -p %d), then barn-node status %s", proc.PID, node, proc.PID, node)
		}
		return exitcode.New(exitcode.Runtime, "%s still runs %s after QMP quit and its QMP still answers; no signal sent", node, since(start)).
			WithReason("stop_failed").WithNext(next)
	}
	o.Progress(fmt.Sprintf("%s: QMP gone but the process remains; verified signals", node))
	return signalPath(ctx, t, o)
}

// verifiedSession opens one QMP session, proves on it that QEMU answers as
// t's node and UUID and checks that the recorded process (if any) is Ours;
// the caller sends its command on that same session and closes it.
func verifiedSession(ctx context.Context, m qmp.Monitor, t Target) (*qmp.Session, error) {
	s, err := m.Open(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.Verify(t.Node, t.UUID); err != nil {
		s.Close()
		return nil, err
	}
	if err := checkOurs(t); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// qmpFailed turns a failed QMP step of the ladder into the next step or
// the error that ends it.
func qmpFailed(ctx context.Context, t Target, o StopOptions, err error) error {
	var ee *exitcode.Error
	switch {
	case ctx.Err() != nil:
		return exitcode.Wrap(exitcode.Cancelled, ctx.Err(), "stopping %s", t.Node)
	case errors.Is(err, qmp.ErrIdentityMismatch):
		return mismatch(t.Node, err)
	case errors.As(err, &ee):
		return err // the recorded process does not match
	case errors.Is(err, qmp.ErrUnavailable):
		o.Progress(fmt.Sprintf("%s: QMP unavailable (%v); verifying the process", t.Node, err))
		return signalPath(ctx, t, o)
	case errors.Is(err, qmp.ErrBusy): // before deadlines: a busy monitor's silence is a timeout
		return busyPath(ctx, t, o, err)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return exitcode.Wrap(exitcode.Cancelled, err, "stopping %s", t.Node) // the caller's deadline (lib/qmp)
	}
	return exitcode.Wrap(exitcode.Runtime, err, "QMP of %s answers but failed; not bypassing it with signals", t.Node).
		WithReason("qmp_error").WithNext("barn-node status " + t.Node)
}

// busyPath is step 6: something holds QMP open without answering.
func busyPath(ctx context.Context, t Target, o StopOptions, qerr error) error {
	if p := t.Process; p != nil && t.verdict() == procid.Ours && procid.Frozen(p.PID) {
		o.Progress(fmt.Sprintf("%s: QMP is silent because pid %d is stopped (SIGSTOP or a debugger) and cannot answer; verified signals", t.Node, p.PID))
		if err := signalLadder(ctx, *p, o); err != nil {
			return err
		}
		return finish(ctx, t.Node, t.Runtime)
	}
	return QMPBusy(t.Node, qerr, "barn-node stop "+t.Node)
}

// QMPBusy is the error of an operation refused because node's QMP monitor
// is held by another client (conflict "qmp_busy"; nothing was sent). It
// names the holding processes when sock_diag shows them
// (procid.SocketClients); its next step is to end that session, then run
// then.
func QMPBusy(node string, qerr error, then string) error {
	sock := ""
	var be *qmp.BusyError
	if errors.As(qerr, &be) {
		sock = be.Socket
	}
	holders, lookErr := socketClients(sock)
	held, next := "held by another client or not answering",
		fmt.Sprintf("close the other client of %s (find it: ss -xp | grep %s), then %s", sock, sock, then)
	if len(holders) > 0 {
		pids := make([]string, len(holders))
		for i, p := range holders {
			pids[i] = strconv.Itoa(p)
		}
		list := strings.Join(pids, ",")
		held = "held by pid " + list
		next = fmt.Sprintf("end the QMP session of pid %s on %s (ps -o pid,user,args -p %s), then %s", list, sock, list, then)
	}
	if lookErr != nil {
		held += " (its clients could not be listed: " + lookErr.Error() + ")"
	}
	return exitcode.Wrap(exitcode.Conflict, qerr,
		"%s: its QMP monitor is %s; a busy monitor is not an absent QEMU, so nothing was sent", node, held).
		WithReason("qmp_busy").WithNext(next)
}

// socketClients is procid.SocketClients of a monitor found busy, asked
// again for up to a second while it shows no client or fails: a busy
// monitor has a client (once, in CI's -race pass on a loaded host, the
// holder went unnamed; why is not known, and a failed lookup is now
// named in the message).
func socketClients(sock string) ([]int, error) {
	deadline := time.Now().Add(time.Second)
	for {
		pids, err := procid.SocketClients(sock)
		if (err == nil && len(pids) > 0) || sock == "" || time.Now().After(deadline) {
			return pids, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkOurs requires t's recorded process (when there is one) to be Ours
// while QMP proves the identity.
func checkOurs(t Target) error {
	node, proc := t.Node, t.Process
	if proc == nil {
		return nil
	}
	if v := t.verdict(); v != procid.Ours {
		return exitcode.New(exitcode.Conflict,
			"QMP of %s proves the VM runs, but recorded pid %d is %s; refusing to act on a process that does not match",
			node, proc.PID, v).WithReason("process_mismatch").
			WithNext(fmt.Sprintf("stop %s's QEMU yourself (QMP proves it; recorded pid %d is not it), then barn-node status %s", node, proc.PID, node))
	}
	return nil
}

// signalPath is step 5: QMP is proven unavailable.
func signalPath(ctx context.Context, t Target, o StopOptions) error {
	node := t.Node
	if p := t.Process; p != nil {
		switch v := t.verdict(); v {
		case procid.Ours:
			if err := signalLadder(ctx, *p, o); err != nil {
				return err
			}
			return finish(ctx, node, t.Runtime)
		case procid.Unknown:
			return exitcode.New(exitcode.Conflict,
				"QMP of %s is unavailable and the identity of recorded pid %d cannot be verified; no signal sent", node, p.PID).
				WithReason("process_unverified").WithNext(UnprovenNext(node, []int{p.PID}))
		case procid.Foreign:
			o.Progress(fmt.Sprintf("%s: recorded pid %d now belongs to an unrelated process (not signalled); checking the process table", node, p.PID))
		}
	}
	tab, err := t.table()
	sole := tab.Sole()
	switch {
	case err == nil && sole != nil:
		o.Progress(fmt.Sprintf("%s: no live recorded process, but the process table shows pid %d running this node's invocation; adopting it", node, sole.PID))
		if err := signalLadder(ctx, *sole, o); err != nil {
			return err
		}
	case err != nil || !tab.Absent():
		return unproven(node, tab, t.Invocation, err)
	}
	return finish(ctx, node, t.Runtime)
}

// signalLadder sends verified SIGTERM then, after re-capturing, SIGKILL.
func signalLadder(ctx context.Context, proc vmrecord.Process, o StopOptions) error {
	o = o.withDefaults()
	o.Progress(fmt.Sprintf("pid %d: identity verified; SIGTERM, waiting up to %s (longer while it is ending)", proc.PID, o.TermWait))
	sent, err := verifiedSignal(proc, unix.SIGTERM)
	if err != nil {
		return err
	}
	if !sent || waitGone(ctx, processGone(proc), o.TermWait, o.Poll) {
		return nil
	}
	if ctx.Err() != nil {
		return exitcode.Wrap(exitcode.Cancelled, ctx.Err(), "stopping pid %d", proc.PID)
	}
	o.Progress(fmt.Sprintf("pid %d: still alive after SIGTERM; re-captured identity, SIGKILL", proc.PID))
	if sent, err = verifiedSignal(proc, unix.SIGKILL); err != nil {
		return err
	}
	if !sent {
		return nil
	}
	return awaitKilled(ctx, proc, o, "barn-node status")
}

// awaitKilled waits for proc to end after the SIGKILL just sent to it:
// nil once it is gone, cancelled when ctx ends first, else runtime
// stop_failed saying how long it waited, with next as the hint.
func awaitKilled(ctx context.Context, proc vmrecord.Process, o StopOptions, next string) error {
	start := time.Now()
	if waitGone(ctx, processGone(proc), o.KillWait, o.Poll) {
		return nil
	}
	if ctx.Err() != nil {
		return exitcode.Wrap(exitcode.Cancelled, ctx.Err(), "waiting for pid %d to end after SIGKILL", proc.PID)
	}
	return exitcode.New(exitcode.Runtime, "pid %d has not ended %s after SIGKILL", proc.PID, since(start)).
		WithReason("stop_failed").WithNext(next)
}

// since is the time from start, rounded for a message.
func since(start time.Time) time.Duration { return time.Since(start).Round(100 * time.Millisecond) }

// verifiedSignal pins the process with a pidfd, re-captures its tuple and
// sends sig only when it is still Ours. sent is false when the process
// turned out Dead or Foreign (stopped; nothing sent).
func verifiedSignal(proc vmrecord.Process, sig unix.Signal) (sent bool, err error) {
	fd, ferr := pidfdOpen(proc.PID)
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
		err = pidfdSignal(fd, sig)
	} else {
		err = unix.Kill(proc.PID, sig) // no pidfd (kernel < 5.3, macOS): checked just above
	}
	if errors.Is(err, unix.ESRCH) {
		return false, nil
	}
	if err != nil {
		return false, exitcode.Wrap(exitcode.Runtime, err, "sending %s to pid %d", sig, proc.PID).WithReason("signal_failed")
	}
	return true, nil
}

// goneCheck is how a wait tells that a VM went away (gone) and, while it
// has not, that its known process is on its way out (exiting; nil without
// a known process).
type goneCheck struct{ gone, exiting func() bool }

// ExitWait bounds how much longer than its own deadline a wait follows a
// process that is provably ending (procid.Exiting): a large guest's
// memory takes seconds to release, and a process is not gone (nor its
// disk images' locks free) until its threads end.
const ExitWait = 2 * time.Minute

// waitGone polls c every poll for up to d, and up to ExitWait more while
// c.exiting holds at d; it reports whether the VM went away.
func waitGone(ctx context.Context, c goneCheck, d, poll time.Duration) bool {
	deadline, extended := time.Now().Add(d), false
	for {
		if c.gone() {
			return true
		}
		if time.Now().After(deadline) {
			if extended || c.exiting == nil || !c.exiting() {
				return false
			}
			deadline, extended = time.Now().Add(ExitWait), true
		}
		if !sleep(ctx, poll) {
			return false
		}
	}
}

// processGone is the check that proc is Dead or Foreign.
func processGone(proc vmrecord.Process) goneCheck {
	return goneCheck{
		gone: func() bool {
			v := procid.Observe(proc)
			return v == procid.Dead || v == procid.Foreign
		},
		exiting: func() bool { return procid.Exiting(proc) },
	}
}

// gone is the check that t's VM went away. With a known process (the
// recorded or adopted tuple) that process must be Dead or Foreign. With
// none, Barn's monitor must have stopped listening and the process table
// must show no process claiming t: a socket or pidfile that vanished (a
// wiped runtime directory) is never proof on its own.
func (t Target) gone(proc *vmrecord.Process) goneCheck {
	if proc != nil {
		return processGone(*proc)
	}
	return goneCheck{gone: func() bool {
		if socketListening(t.Runtime.BarnQMP) {
			return false
		}
		tab, err := t.table()
		return err == nil && tab.Absent()
	}}
}

func finish(ctx context.Context, node string, rt vmrecord.Runtime) error {
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
func cleanupSettled(ctx context.Context, rt vmrecord.Runtime) error {
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
func CleanupRuntime(ctx context.Context, rt vmrecord.Runtime) error {
	for _, sock := range rt.Sockets() {
		fi, err := os.Lstat(sock)
		if err != nil {
			continue
		}
		if fi.Mode().Type() != os.ModeSocket {
			return exitcode.New(exitcode.Conflict, "%s exists and is not a socket; not removing it", sock).WithReason("runtime_busy")
		}
		if socketListening(sock) {
			// status would come back here: the listener is the user's to
			// identify.
			return exitcode.New(exitcode.Conflict, "something listens on QMP socket %s; not removing it", sock).
				WithReason("runtime_busy").WithNext("stop what listens on " + sock + " (ss -xlp | grep " + sock + ") if it is a leftover QEMU, then barn-node status")
		}
		if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
			return exitcode.Wrap(exitcode.Runtime, err, "removing stale QMP socket")
		}
	}
	if _, err := os.Lstat(rt.Pidfile); err == nil {
		return removeStalePidfile(rt.Pidfile)
	}
	return nil
}

// afterPidfileCheck is a test hook run between removeStalePidfile's check
// of a pidfile and its removal: a test swaps the file there.
var afterPidfileCheck func(path string)

// removeStalePidfile removes the pidfile at path when the PID it names is
// dead or provably not the QEMU that wrote it, through the identity of
// the file it read (fileid.Remove): a pidfile written or swapped in since
// is kept (conflict, runtime_busy).
func removeStalePidfile(path string) error {
	pid, id, err := readPidfile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return exitcode.Wrap(exitcode.Conflict, err, "not removing pidfile").WithReason("runtime_busy")
	}
	if procid.Alive(pid) && !foreignToPidfile(pid, path) {
		return exitcode.New(exitcode.Conflict, "pidfile %s names live pid %d; not removing it", path, pid).
			WithReason("runtime_busy").WithNext(fmt.Sprintf("stop pid %d if it is a leftover QEMU (ps -o args= -p %d), then barn-node status", pid, pid))
	}
	if afterPidfileCheck != nil {
		afterPidfileCheck(path)
	}
	why, err := id.Remove(path)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "removing stale pidfile")
	}
	if why != "" {
		return exitcode.New(exitcode.Conflict, "pidfile %s changed while Barn checked it (%s); not removing it", path, why).
			WithReason("runtime_busy").WithNext("barn-node status")
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
