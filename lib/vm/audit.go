package vm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"barn.dev/lib/procid"
	"barn.dev/lib/qmp"
	"barn.dev/lib/vmrecord"
)

// AuditQMPTimeout bounds Audit's QMP identity query.
const AuditQMPTimeout = 2 * time.Second

// Runtime values of Liveness.Runtime (reference §3.2 "runtime").
const (
	RuntimeRunning  = "running"  // QMP proves the identity and the recorded process (if any) is ours
	RuntimeInactive = "inactive" // nothing answers QMP, the recorded process (if any) is dead or foreign, and no process claims the node
	RuntimeUnknown  = "unknown"  // anything else: ambiguous, never acted on
)

// Liveness is a read-only audit of a node's runtime.
type Liveness struct {
	Running bool           // the VM process runs (QMP identity proven, or a process tuple Ours)
	Verdict procid.Verdict // of the recorded tuple; Unknown when none was recorded
	QMP     error          // nil when QMP answered with the expected name and UUID
	Detail  string         // one human sentence
	Runtime string         // RuntimeRunning, RuntimeInactive or RuntimeUnknown
	Status  string         // QMP query-status ("running", "paused", …) when QMP answered
	// Found is the process the process table shows running the node's
	// invocation exactly, when no live recorded tuple proves the VM and it
	// is the only process claiming the node; the caller may adopt it.
	Found *vmrecord.Process
	// Unproven lists the PIDs that keep the evidence ambiguous: a recorded
	// process of unknown identity, or processes that claim the node's UUID
	// or runtime paths without being provably its QEMU.
	Unproven []int
}

// Audit observes t's runtime without changing anything: QMP identity and
// query-status on one session on Barn's own monitor (Runtime.BarnQMP,
// 2 s), procid.Observe of the recorded tuple, and, whenever those do not
// prove the VM runs, the process table (procid.Find): a missing pidfile or
// socket is never proof that a VM is gone. Inactive means QMP is proven
// unavailable, the recorded tuple (if any) is dead or foreign, and no
// process claims the node's UUID or runtime paths.
// errors.Is(l.QMP, qmp.ErrIdentityMismatch) means another VM answers there;
// errors.Is(l.QMP, qmp.ErrUnavailable) means nothing answers;
// errors.Is(l.QMP, qmp.ErrBusy) means something holds the monitor without
// answering, which is never read as inactive.
func Audit(ctx context.Context, t Target) Liveness {
	m := qmp.Monitor{Socket: t.Runtime.BarnQMP, Timeout: AuditQMPTimeout}
	l := Liveness{Verdict: procid.Unknown}
	var st struct {
		Status string `json:"status"`
	}
	l.QMP = m.Verified(ctx, t.Node, t.UUID, "query-status", nil, &st)
	l.Status = st.Status
	proc := t.Process
	qmpOK := l.QMP == nil
	if proc != nil {
		l.Verdict = t.verdict()
	}

	switch {
	case qmpOK && (proc == nil || l.Verdict == procid.Ours):
		l.Running, l.Runtime = true, RuntimeRunning
		l.Detail = "QMP answers as " + t.Node
		if proc == nil {
			l.Detail += "; no process identity recorded"
		}
	case qmpOK:
		l.Running, l.Runtime = true, RuntimeUnknown
		l.Detail = fmt.Sprintf("QMP answers as %s but recorded pid %d is %s", t.Node, proc.PID, l.Verdict)
	case errors.Is(l.QMP, qmp.ErrIdentityMismatch):
		l.Running, l.Runtime = l.Verdict == procid.Ours, RuntimeUnknown
		l.Detail = "QMP identity mismatch: " + l.QMP.Error()
	case l.Verdict == procid.Ours:
		l.Running, l.Runtime = true, RuntimeUnknown
		l.Detail = fmt.Sprintf("recorded pid %d runs but QMP does not answer: %v", proc.PID, l.QMP)
		if procid.Frozen(proc.PID) {
			l.Detail += " (every thread is stopped: SIGSTOP or a debugger)"
		}
	case proc != nil && l.Verdict == procid.Unknown:
		l.Runtime, l.Unproven = RuntimeUnknown, []int{proc.PID}
		l.Detail = fmt.Sprintf("QMP: %v; recorded pid %d is %s", l.QMP, proc.PID, l.Verdict)
	default:
		l.tableVerdict(t)
	}
	return l
}

// tableVerdict decides from the process table when neither QMP nor a live
// recorded tuple proves the VM (no tuple, or one that is dead or foreign).
func (l *Liveness) tableVerdict(t Target) {
	l.Runtime = RuntimeUnknown
	recorded := "no process recorded"
	if t.Process != nil {
		recorded = fmt.Sprintf("recorded pid %d is %s", t.Process.PID, l.Verdict)
	}
	tab, err := t.table()
	switch sole := tab.Sole(); {
	case err != nil:
		l.Detail = fmt.Sprintf("QMP: %v; %s; %v", l.QMP, recorded, err)
	case sole != nil:
		l.Running, l.Found = true, sole
		l.Detail = fmt.Sprintf("QMP: %v; %s; the process table shows pid %d running this node's invocation", l.QMP, recorded, sole.PID)
	case !tab.Absent():
		l.Unproven = tab.PIDs()
		l.Detail = fmt.Sprintf("QMP: %v; %s; %s", l.QMP, recorded, describe(tab, t.Invocation))
	case errors.Is(l.QMP, qmp.ErrUnavailable):
		l.Runtime = RuntimeInactive
		l.Detail = "QMP unavailable; " + recorded + "; no process claims this node"
	default:
		l.Detail = fmt.Sprintf("QMP: %v; %s; no process claims this node, yet something holds its monitor", l.QMP, recorded)
	}
}
