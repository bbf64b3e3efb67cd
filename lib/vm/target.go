package vm

import (
	"fmt"
	"strconv"
	"strings"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/procid"
	"barn.dev/lib/vmrecord"
)

// Target is one node's QEMU as Barn recorded it: what Stop and Audit
// judge the live evidence against. Its fields are the same-named records
// of the node's committed state (state.Node: Node, VMUUID, Runtime,
// Invocation, Process).
type Target struct {
	Node       string
	UUID       string              // the VM UUID QEMU runs with (-uuid)
	Runtime    vmrecord.Runtime    // its QMP sockets and pidfile
	Invocation vmrecord.Invocation // what was launched: the process table is matched against it
	Process    *vmrecord.Process   // the recorded tuple; nil when none was recorded (an interrupted start)
}

// table scans the process table for processes claiming t: its VM UUID or
// one of its runtime paths (see procid.Find).
func (t Target) table() (procid.Table, error) {
	return procid.Find(procid.Claim{UUID: t.UUID, Paths: append(t.Runtime.Sockets(), t.Runtime.Pidfile)}, t.Invocation)
}

// describe is one sentence on what a table that proves neither absence
// nor a sole match shows.
func describe(tab procid.Table, inv vmrecord.Invocation) string {
	var parts []string
	for _, m := range tab.Matches {
		switch {
		case m.Process == nil:
			parts = append(parts, fmt.Sprintf("pid %d claims it (identity unreadable)", m.PID))
		case m.Exact:
			parts = append(parts, fmt.Sprintf("pid %d runs its invocation", m.PID))
		case m.Argv:
			parts = append(parts, fmt.Sprintf("pid %d runs its command line from another executable (%s, not %s)", m.PID, m.Process.Executable, inv.Binary))
		default:
			parts = append(parts, fmt.Sprintf("pid %d claims its UUID or runtime paths with another command line", m.PID))
		}
	}
	if len(tab.Unreadable) > 0 {
		parts = append(parts, fmt.Sprintf("%d process(es) of this user could not be read (%v)", len(tab.Unreadable), tab.Unreadable))
	}
	return strings.Join(parts, "; ")
}

// unproven is the conflict (reason "process_unverified") of a node whose
// process table evidence is ambiguous: nothing is signalled.
func unproven(node string, tab procid.Table, inv vmrecord.Invocation, err error) error {
	if err != nil {
		return exitcode.Wrap(exitcode.Conflict, err, "%s: the process table cannot be read; cannot prove whether its QEMU runs, no signal sent", node).
			WithReason("process_unverified")
	}
	return exitcode.New(exitcode.Conflict, "%s: QMP does not answer and the process table does not prove which QEMU is this node's (%s); no signal sent",
		node, describe(tab, inv)).WithReason("process_unverified").WithNext(UnprovenNext(node, tab.PIDs()))
}

// UnprovenNext is the one action that settles ambiguous process evidence:
// look at the processes, stop whichever is not wanted, then let status
// judge again.
func UnprovenNext(node string, pids []int) string {
	s := make([]string, len(pids))
	for i, p := range pids {
		s[i] = strconv.Itoa(p)
	}
	return fmt.Sprintf("ps -o pid,user,args -p %s   # stop what is not wanted, then: barn-node status %s", strings.Join(s, ","), node)
}

// runs reports whether the captured process p runs inv: its argv is inv's
// byte for byte and it runs the file inv's binary names (path, device and
// inode: procid.RunsBinary).
func runs(p vmrecord.Process, inv vmrecord.Invocation) bool {
	return p.ArgvHash == procid.ArgvHash(inv) && procid.RunsBinary(p, inv.Binary)
}

// verdict is procid.Observe of t's recorded tuple, except that a tuple
// whose executable path is not t's invocation binary is never Ours
// (Unknown): a process is the node's QEMU only when it runs the
// invocation's binary. The file itself (device and inode) was proven at
// launch (procid.RunsBinary) and Observe holds the live process to it, so
// a QEMU whose binary a package upgrade replaced since is still Ours.
func (t Target) verdict() procid.Verdict {
	v := procid.Observe(*t.Process)
	if v == procid.Ours && !procid.SameExecutable(t.Process.Executable, t.Invocation.Binary) {
		return procid.Unknown
	}
	return v
}
