package lifecycle

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/human"
	"barn.dev/lib/procid"
	"barn.dev/lib/state"
)

// StatusSchema is the schema of the status document.
const StatusSchema = "barn.status/v1"

// Status is the barn.status/v1 document.
type Status struct {
	Schema     string       `json:"schema"`
	Generation int64        `json:"generation"` // 0 when no deployment
	SpecHash   string       `json:"spec_hash"`
	Nodes      []NodeStatus `json:"nodes"` // sorted by name
	Note       string       `json:"note,omitempty"`
	// Performance is TCGPerformanceNote when any listed node runs under
	// TCG, else "".
	Performance string    `json:"performance"`
	Converged   []string  `json:"converged"` // what status changed in state
	Failures    []Failure `json:"failures"`
	CheckedAt   time.Time `json:"checked_at"` // when the audit ran: the text view's UP and AGE are measured to it
	// NetFaults are barn-net's recorded network faults (netfaults.go);
	// absent without a private network, or when NetFaultsProblem says
	// why the record could not be read.
	NetFaults        []NetFault `json:"net_faults,omitempty"`
	NetFaultsProblem string     `json:"net_faults_problem,omitempty"`
}

// NodeStatus is one node's recorded state plus the live audit.
type NodeStatus struct {
	Name    string `json:"name"`
	Address string `json:"address"`
	Phase   string `json:"phase"`   // recorded phase (after convergence); "unknown" when a document is damaged
	Runtime string `json:"runtime"` // running, inactive, unknown, absent
	// VMStatus is QEMU's own run state when QMP proved the VM: "running",
	// or "paused" after barn-node pause (vCPUs halted; resume continues).
	VMStatus   string `json:"vm_status,omitempty"`
	Image      string `json:"image"`
	Ports      Ports  `json:"ports"`
	Accel      string `json:"accel"`
	PrivateNet string `json:"private_net,omitempty"` // "none" marks the test-only profile without a private NIC
	PID        int    `json:"pid,omitempty"`
	Generation int64  `json:"generation"`
	Reason     string `json:"reason,omitempty"`
	Next       string `json:"next,omitempty"`
	Detail     string `json:"detail,omitempty"`
	// CreatedAt is when the node was created (its committed state's
	// created_at); StartedAt when its running QEMU process started (from
	// /proc, shown as uptime; absent when not running or unknown).
	CreatedAt *time.Time `json:"created_at,omitempty"`
	StartedAt *time.Time `json:"started_at,omitempty"`
	// NetFaults are the IDs of the recorded network faults that act on
	// this node's private address (Status.NetFaults).
	NetFaults []string `json:"net_faults,omitempty"`
}

// Status reports the selected applied nodes (all when none are named) with
// a live identity audit. It never waits for the deployment lock: when the
// lock is free it converges what the audit proves; when busy it shows the
// recorded state with a note naming the holder. One degraded node never
// hides its peers; the returned error is partial (5) when any node is
// degraded.
func (m *Manager) Status(ctx context.Context, selectors []string) (*Status, error) {
	st := &Status{Schema: StatusSchema, Nodes: []NodeStatus{}, Converged: []string{}, Failures: []Failure{}, CheckedAt: m.now()}
	d, err := m.Root.ReadDeployment()
	if err != nil {
		return nil, err
	}
	dirs, err := m.Root.NodeNames()
	if err != nil {
		return nil, err
	}
	if d == nil && len(dirs) == 0 {
		st.Note = "no deployment"
		if len(selectors) > 0 {
			return nil, exitcode.New(exitcode.Usage, "unknown node %q: no deployment is applied", selectors[0]).WithReason("unknown_node")
		}
		return st, nil
	}
	lock, note, err := m.tryDeploymentLock(ctx)
	if err != nil {
		return nil, err
	}
	act := lock != nil
	if act {
		defer func() { _ = lock.Unlock() }() // lock grows to include the node locks
	}
	st.Note = note
	if d != nil {
		st.Generation, st.SpecHash = d.Generation, d.SpecHash
	}
	selected, err := statusSelection(d, dirs, selectors)
	if err != nil {
		return nil, err
	}
	if act {
		// Status converges what it proves: it holds the nodes' locks too.
		all, err := m.Root.WithNodeLocks(ctx, lock, m.Command, false, selected)
		if err != nil {
			return nil, err // the deployment lock is released with them
		}
		lock = all
	}
	m.statusNodes(ctx, st, d, selected, act)
	m.addNetFaults(st)
	if len(st.Failures) > 0 {
		r := &Result{Failures: st.Failures}
		return st, r.Err(len(selected))
	}
	return st, nil
}

// statusNodes adds the status of each selected node to st (converging
// what it proves when act), its failures, and the TCG performance note
// when any node runs under TCG.
func (m *Manager) statusNodes(ctx context.Context, st *Status, d *state.Deployment, selected []string, act bool) {
	for _, name := range selected {
		ns, conv, err := m.statusOne(ctx, d, name, act)
		if conv != "" {
			st.Converged = append(st.Converged, conv)
		}
		if err != nil {
			e := exitcode.As(err)
			ns.Reason, ns.Next, ns.Detail = e.Reason, e.Next, e.Message
			st.Failures = append(st.Failures, FailureOf(name, "status", err))
		}
		st.Nodes = append(st.Nodes, ns)
	}
	for _, n := range st.Nodes {
		if n.Accel == "tcg" {
			st.Performance = TCGPerformanceNote
		}
	}
}

// tryDeploymentLock takes the deployment lock without waiting: nil and
// a note naming the holder when another command holds it (status then
// shows recorded state); nil without a note when there is no state root.
func (m *Manager) tryDeploymentLock(ctx context.Context) (state.Lock, string, error) {
	if !m.Root.Exists() {
		return nil, "", nil
	}
	lock, err := m.Root.LockDeployment(ctx, m.Command, false, nil)
	if err == nil {
		return lock, "", nil
	}
	e := exitcode.As(err)
	if e.Reason != "deployment_busy" {
		return nil, "", err
	}
	h, ok := e.Detail.(state.LockHolder)
	if hp, okp := e.Detail.(*state.LockHolder); okp && hp != nil {
		h, ok = *hp, true
	}
	if !ok {
		return nil, "another barn command is running; showing recorded state", nil
	}
	return nil, fmt.Sprintf("%s (pid %d, since %s) is running; showing recorded state", h.Command, h.PID, h.Started.Format("15:04:05")), nil
}

// statusSelection is the sorted selection of status: every applied node
// and node directory when selectors is empty, else the selectors, each of
// which must be one of those (usage, unknown_node).
func statusSelection(d *state.Deployment, dirs, selectors []string) ([]string, error) {
	names := map[string]bool{}
	if d != nil {
		for _, n := range d.Spec.Nodes {
			names[n.Name] = true
		}
	}
	for _, n := range dirs {
		names[n] = true
	}
	var selected []string
	for n := range names {
		if len(selectors) == 0 {
			selected = append(selected, n)
		}
	}
	for _, s := range selectors {
		if !names[s] {
			return nil, exitcode.New(exitcode.Usage, "unknown node %q", s).WithReason("unknown_node")
		}
		selected = append(selected, s)
	}
	sort.Strings(selected)
	return selected, nil
}

func (m *Manager) statusOne(ctx context.Context, d *state.Deployment, name string, act bool) (NodeStatus, string, error) {
	ns := NodeStatus{Name: name, Runtime: RuntimeAbsent, Phase: string(state.Absent)}
	if d != nil {
		if sn := d.Spec.Node(name); sn != nil {
			ns.Address = sn.Address
		}
	}
	docs, err := m.Root.ReadNodeDocuments(name)
	if err != nil {
		// Damaged evidence says nothing about whether the node exists.
		ns.Phase, ns.Runtime = RuntimeUnknown, RuntimeUnknown
		return ns, "", err
	}
	n := docs.State
	if n == nil {
		conv, err := m.statusUncommitted(d, name, docs, act, &ns)
		return ns, conv, err
	}
	ns.Address = n.Spec.Address
	conv := ""
	if act {
		if docs.Journal != nil {
			if err := m.nodeDirs().FinishCommitted(n, docs.Journal); err != nil {
				return ns, "", err
			}
			conv = name + ": settled a stale prepare journal beside committed state"
		}
	}
	obs := m.observe(ctx, n, act)
	if obs.Converged == "" {
		obs.Converged = conv
	}
	ns.VMStatus = obs.VMStatus
	ns.Phase, ns.Runtime, ns.Image, ns.Ports.SSH, ns.Accel, ns.Generation = string(n.Phase), obs.Runtime, ImageLabel(n.Image), n.SSHPort, n.Accel, n.Generation
	if m.Emu != nil && m.Emu.PrivateNet() == "none" {
		ns.PrivateNet = "none"
	}
	created := n.CreatedAt
	ns.CreatedAt = &created
	if n.Process != nil && obs.Runtime == RuntimeRunning {
		ns.PID = n.Process.PID
		if t, ok := procid.StartedAt(*n.Process); ok {
			if t.Before(created) { // /proc's boot time has one-second resolution
				t = created
			}
			ns.StartedAt = &t
		}
	}
	if obs.Err != nil && !act {
		// recorded state only: an interrupted transition is reported, not converged
		if e := exitcode.As(obs.Err); e.Reason == "interrupted_transition" {
			e = e.WithNext("barn-node status " + name + " (when the running command finishes)")
			return ns, "", e
		}
	}
	return ns, obs.Converged, obs.Err
}

// statusUncommitted is statusOne for a node without committed state: a
// journal that says state was committed (integrity), an unfinished create
// (conflict: the next apply rolls it back), or a node applied but not
// created (with act, a finished destroy's leftover record is removed).
func (m *Manager) statusUncommitted(d *state.Deployment, name string, docs state.NodeDocuments, act bool, ns *NodeStatus) (string, error) {
	if j := docs.Journal; j != nil && j.StateCommitted {
		ns.Phase, ns.Runtime = RuntimeUnknown, RuntimeUnknown
		return "", m.nodeDirs().CommittedStateMissing(name)
	}
	if j := docs.Journal; j != nil {
		ns.Phase = string(state.Preparing)
		source := ""
		if d != nil {
			source = d.Spec.Source.Inventory()
		}
		// The next apply rolls the unfinished create back and creates
		// the node anew.
		return "", exitcode.New(exitcode.Conflict, "%s: an unfinished create is journaled (%d artifact(s))", name, len(j.Completed)).
			WithReason("interrupted_transition").WithNext(applyAgain(source, nil))
	}
	conv := ""
	if act {
		if done, err := m.nodeDirs().DropFinishedDestroy(name); err != nil {
			return "", err
		} else if done {
			conv = name + ": removed the record of a destroy that had finished its work"
		}
	}
	if d != nil && d.Spec.Node(name) != nil {
		ns.Detail = "applied but not created"
	}
	return conv, nil
}

// RenderText implements the --text view: one aligned row per node (NODE,
// ADDRESS, PHASE, RUNTIME, SSH, ACCEL, UP: how long its QEMU has run, AGE:
// since it was created, both as durations at CheckedAt); TCG is marked
// even in plain text.
func (s *Status) RenderText(w io.Writer) error {
	if s.Note != "" {
		writeLine(w, "note: %s", s.Note)
	}
	if err := s.renderTable(w); err != nil {
		return err
	}
	for _, n := range s.Nodes {
		if n.Next != "" {
			writeLine(w, "next (%s): %s", n.Name, n.Next)
		}
	}
	for _, c := range s.Converged {
		writeLine(w, "converged: %s", c)
	}
	s.renderNetFaults(w)
	if s.Performance != "" {
		writeLine(w, "note: %s", s.Performance)
	}
	return nil
}

// renderTable writes the aligned node rows (none without nodes).
func (s *Status) renderTable(w io.Writer) error {
	if len(s.Nodes) == 0 {
		return nil
	}
	tw := human.Table(w)
	fmt.Fprintln(tw, "NODE\tADDRESS\tPHASE\tRUNTIME\tSSH\tACCEL\tUP\tAGE")
	for _, n := range s.Nodes {
		extra := ""
		if n.PrivateNet == "none" {
			extra = "private-net=none(test-only)"
		}
		if n.VMStatus == "paused" {
			extra = strings.TrimSpace("PAUSED " + extra)
		}
		if n.Reason != "" {
			extra = strings.TrimSpace(extra + " (" + n.Reason + ")")
		}
		row := strings.Join([]string{n.Name, dash(n.Address), n.Phase, n.Runtime, sshText(n.Ports.SSH), dash(strings.ToUpper(n.Accel)),
			s.since(n.StartedAt), s.since(n.CreatedAt)}, "\t")
		if extra != "" {
			row += "\t" + extra
		}
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
}

// since renders the time from t to the audit as a duration, or "-".
func (s *Status) since(t *time.Time) string {
	if t == nil || t.IsZero() || s.CheckedAt.IsZero() {
		return "-"
	}
	return human.Duration(s.CheckedAt.Sub(*t))
}
