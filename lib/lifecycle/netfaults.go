package lifecycle

import (
	"fmt"
	"io"
	"slices"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/hostnet"
	"barn.dev/lib/state"
)

// Network faults are barn-net's (barn-net fault): root-owned kernel state
// it records in <BARN_NET_STATE>/faults.json and alone changes. barn-node
// status only reads that record (Network.Faults), so a node's row says
// which faults act on it; whether the kernel enforces each one needs root
// to see (`sudo barn-net fault list`).

// NetFault is one recorded network fault as barn-node status shows it.
type NetFault struct {
	ID          string    `json:"id"`          // barn-net's fault ID (f<N>)
	Kind        string    `json:"kind"`        // isolate | partition | degrade
	Description string    `json:"description"` // "partition meta <-> pg-test-1"
	State       string    `json:"state"`       // active; installing or healing when barn-net was interrupted
	Addresses   []string  `json:"addresses"`   // the private addresses it acts on
	CreatedAt   time.Time `json:"created_at"`
	AgeSeconds  int64     `json:"age_seconds"` // at the status document's checked_at
}

// addNetFaults attaches the faults barn-net recorded on this profile's
// bridge to st, and each fault's ID to the rows of the nodes it acts on
// (by private address). An unreadable record is NetFaultsProblem, never
// "no fault" and never a node's failure. Nothing is read without a private
// network (the test-only profile).
func (m *Manager) addNetFaults(st *Status) {
	if m.Net == nil || m.Emu == nil || m.Emu.PrivateNet() == "none" {
		return
	}
	faults, err := m.Net.Faults()
	if err != nil {
		e := exitcode.As(err)
		st.NetFaultsProblem = e.Message
		if e.Next != "" {
			st.NetFaultsProblem += " (next: " + e.Next + ")"
		}
		return
	}
	st.NetFaults = []NetFault{}
	for i := range st.Nodes {
		st.Nodes[i].NetFaults = []string{}
	}
	for _, f := range faults {
		nf := NetFault{ID: f.ID, Kind: f.Kind, Description: f.Describe(), State: f.State, Addresses: []string{},
			CreatedAt: f.Created, AgeSeconds: int64(st.CheckedAt.Sub(f.Created) / time.Second)}
		for _, mb := range append(slices.Clone(f.A), f.B...) {
			nf.Addresses = append(nf.Addresses, mb.Address)
		}
		st.NetFaults = append(st.NetFaults, nf)
		for i, n := range st.Nodes {
			if n.Address != "" && slices.Contains(nf.Addresses, n.Address) {
				st.Nodes[i].NetFaults = append(st.Nodes[i].NetFaults, f.ID)
			}
		}
	}
}

// faultNotes adds a note to res for each recorded network fault acting on
// the private address of a node d applied and destroy removed: barn-node
// cannot heal it (the fault is barn-net's, and root's), and it would cut or
// slow a node created at that address next. An unreadable record is a
// note too, never "no fault".
func (m *Manager) faultNotes(d *state.Deployment, destroyed map[string]bool, res *Result) {
	if d == nil || len(destroyed) == 0 || m.Net == nil || m.Emu == nil || m.Emu.PrivateNet() == "none" {
		return
	}
	faults, err := m.Net.Faults()
	if err != nil {
		res.Notes = append(res.Notes, "network faults unknown: "+exitcode.As(err).Message)
		return
	}
	gone := map[string]string{} // private address -> destroyed node
	for _, n := range d.Spec.Nodes {
		if destroyed[n.Name] && n.Address != "" {
			gone[n.Address] = n.Name
		}
	}
	for _, f := range faults {
		for _, mb := range append(slices.Clone(f.A), f.B...) {
			name, ok := gone[mb.Address]
			if !ok {
				continue
			}
			if f.Kind == hostnet.FaultDegrade { // its netem went with the node's tap
				res.Notes = append(res.Notes, fmt.Sprintf("network fault %s (%s) stays recorded for %s, destroyed %s's address, though its netem went with the node's tap; remove the record: sudo barn-net fault heal %s",
					f.ID, f.Describe(), mb.Address, name, f.ID))
			} else {
				res.Notes = append(res.Notes, fmt.Sprintf("network fault %s (%s) still acts on %s, destroyed %s's address, and on a node created there next; heal it: sudo barn-net fault heal %s",
					f.ID, f.Describe(), mb.Address, name, f.ID))
			}
			break
		}
	}
}

// renderNetFaults writes one line per recorded fault, or the problem
// reading them.
func (s *Status) renderNetFaults(w io.Writer) {
	for _, f := range s.NetFaults {
		writeLine(w, "network fault %s: %s, %s, age %s", f.ID, f.Description, f.State, time.Duration(f.AgeSeconds)*time.Second)
	}
	if len(s.NetFaults) > 0 {
		writeLine(w, "note: whether the host enforces them: sudo barn-net fault list")
	}
	if s.NetFaultsProblem != "" {
		writeLine(w, "note: network faults unknown: %s", s.NetFaultsProblem)
	}
}

// recordedFaults reads barn-net's fault record for bridge.
func recordedFaults(h *hostnet.Host, bridge string) ([]hostnet.Fault, error) {
	r, err := h.ReadFaults()
	if err != nil {
		return nil, err
	}
	out := []hostnet.Fault{}
	for _, f := range r.Faults {
		if f.Bridge == bridge {
			out = append(out, f)
		}
	}
	return out, nil
}
