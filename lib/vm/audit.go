package vm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"barn.dev/lib/procid"
	"barn.dev/lib/qmp"
	"barn.dev/lib/state"
)

// AuditQMPTimeout bounds Audit's QMP identity query.
const AuditQMPTimeout = 2 * time.Second

// Runtime values of Liveness.Runtime (reference §3.2 "runtime").
const (
	RuntimeRunning  = "running"  // QMP proves the identity and the recorded process (if any) is ours
	RuntimeInactive = "inactive" // nothing answers QMP, and the recorded process is dead or foreign (or, with none recorded, the pidfile names no live process)
	RuntimeUnknown  = "unknown"  // anything else: ambiguous, never acted on
)

// Liveness is a read-only audit of a node's runtime.
type Liveness struct {
	Running bool           // the VM process runs (QMP identity proven, or process tuple Ours)
	Verdict procid.Verdict // of the recorded tuple; Unknown when none was recorded
	QMP     error          // nil when QMP answered with the expected name and UUID
	Detail  string         // one human sentence
	Runtime string         // RuntimeRunning, RuntimeInactive or RuntimeUnknown
	Status  string         // QMP query-status ("running", "paused", …) when QMP answered
}

// Audit observes node's runtime without changing anything: QMP identity
// and query-status on one session on Barn's own monitor (rt.BarnMonitor,
// 2 s), and procid.Observe of
// proc (nil when no tuple is recorded).
// errors.Is(l.QMP, qmp.ErrIdentityMismatch) means another VM answers there;
// errors.Is(l.QMP, qmp.ErrUnavailable) means nothing answers;
// errors.Is(l.QMP, qmp.ErrBusy) means something holds the monitor without
// answering, which is never read as inactive.
func Audit(ctx context.Context, node, vmUUID string, rt state.Runtime, proc *state.Process) Liveness {
	m := qmp.Monitor{Socket: rt.BarnMonitor(), Timeout: AuditQMPTimeout}
	l := Liveness{Verdict: procid.Unknown}
	var st struct {
		Status string `json:"status"`
	}
	l.QMP = m.Verified(ctx, node, vmUUID, "query-status", nil, &st)
	l.Status = st.Status
	if proc != nil {
		l.Verdict = procid.Observe(*proc)
	}
	qmpOK := l.QMP == nil
	qmpGone := errors.Is(l.QMP, qmp.ErrUnavailable)
	gone := l.Verdict == procid.Dead || l.Verdict == procid.Foreign
	if proc == nil {
		// No tuple recorded (an interrupted or failed start): the pidfile
		// QEMU wrote is the only process evidence; a live or unreadable
		// one is never taken for a stopped VM.
		pid, err := ReadPidfile(rt.Pidfile)
		gone = errors.Is(err, os.ErrNotExist) || (err == nil && !procid.Alive(pid))
	}

	switch {
	case qmpOK && (proc == nil || l.Verdict == procid.Ours):
		l.Running, l.Runtime = true, RuntimeRunning
		l.Detail = "QMP answers as " + node
		if proc == nil {
			l.Detail += "; no process identity recorded"
		}
	case qmpOK:
		l.Running, l.Runtime = true, RuntimeUnknown
		l.Detail = fmt.Sprintf("QMP answers as %s but recorded pid %d is %s", node, proc.PID, l.Verdict)
	case errors.Is(l.QMP, qmp.ErrIdentityMismatch):
		l.Running, l.Runtime = l.Verdict == procid.Ours, RuntimeUnknown
		l.Detail = "QMP identity mismatch: " + l.QMP.Error()
	case qmpGone && gone:
		l.Runtime = RuntimeInactive
		l.Detail = "QMP unavailable"
		if proc != nil {
			l.Detail += fmt.Sprintf("; recorded pid %d is %s", proc.PID, l.Verdict)
		}
	case l.Verdict == procid.Ours:
		l.Running, l.Runtime = true, RuntimeUnknown
		l.Detail = fmt.Sprintf("recorded pid %d runs but QMP does not answer: %v", proc.PID, l.QMP)
	case proc == nil:
		l.Runtime = RuntimeUnknown
		l.Detail = fmt.Sprintf("QMP: %v; no process recorded and pidfile %s names a live or unreadable process", l.QMP, rt.Pidfile)
	default:
		l.Runtime = RuntimeUnknown
		l.Detail = fmt.Sprintf("QMP: %v; recorded pid %d is %s", l.QMP, proc.PID, l.Verdict)
	}
	return l
}
