package hostnet

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/wire"
)

// Network faults on the private network (barn-net fault). Why barn-net and
// why host side:
//
//   - barn-net already runs as root and owns the bridge; the facts a fault
//     acts on (bridge, the host's private address, the taps QEMU holds) are
//     its facts. barn-node stays unprivileged and only names the nodes
//     (barn-node hosts | sudo barn-net fault …).
//   - Enforced in a guest (iptables over SSH), a fault needs root in the
//     guest, the guest's own software (Pigsty's firewall roles, a test's
//     iptables -F) can undo it, and it dies with a reboot. On the host's
//     bridge (an nftables bridge-family table) and the node's tap (a tc
//     netem root qdisc) the guest can do nothing about it, and it outlives
//     the guest's reboots.
//   - macOS (vmnet) has neither nftables nor tc on the vmnet bridge: faults
//     are Linux-only and refuse elsewhere (faults_unsupported).
//
// Only Barn's own things are touched: the nftables table bridge
// barn_faults_<bridge> (FaultTable; its rules match the deployment's addresses only, see
// faultRuleset) and a root qdisc with handle
// FaultQdiscHandle on a node's tap. The management NIC is QEMU user-mode
// networking and never crosses the bridge.
//
// The record <StateDir>/faults.json is the truth: the table's content is a
// pure function of it, rewritten atomically (one nft transaction) on every
// change. A fault is recorded "installing" before its first effect and
// "active" after; a heal marks it "healing", removes the effect, then drops
// the record. Every fault command first converges the record (finishes
// every pending install and heal), so a crash at any step converges on the
// next command: `barn-net fault heal ID` (status prints it as next:).

// FaultsSchema is the schema of <StateDir>/faults.json.
const FaultsSchema = "barn.net.faults/v1"

// Fault kinds.
const (
	FaultIsolate   = "isolate"
	FaultPartition = "partition"
	FaultDegrade   = "degrade"
)

// Fault states.
const (
	FaultInstalling = "installing"
	FaultActive     = "active"
	FaultHealing    = "healing"
)

// FaultRecord is <StateDir>/faults.json: root-owned, 0644 (it holds no
// secret, and barn-node status, unprivileged, shows the faults from it).
type FaultRecord struct {
	Schema string  `json:"schema"`
	Next   int     `json:"next"` // the number of the next fault's ID
	Faults []Fault `json:"faults"`
}

// Fault is one injected fault. A: the isolated or degraded node, or the
// first group of a partition; B: the partition's second group. OneWay
// partitions drop A→B only.
type Fault struct {
	ID          string    `json:"id"` // f<N>
	Kind        string    `json:"kind"`
	State       string    `json:"state"`
	A           []Member  `json:"a"`
	B           []Member  `json:"b,omitempty"`
	OneWay      bool      `json:"one_way,omitempty"`
	Netem       *Netem    `json:"netem,omitempty"`
	Bridge      string    `json:"bridge"`
	HostAddress string    `json:"host_address,omitempty"` // isolate: the host's private address, cut too
	Created     time.Time `json:"created"`
}

// Member is a node as barn-net knows it: its private address and the name
// it was given by (the address itself when given by address).
type Member struct {
	Name    string `json:"name"`
	Address string `json:"address"`
}

// Netem is a degrade's link model, applied to packets delivered to the
// node (the tap's egress): Delay and Jitter in microseconds, Loss in
// percent, Rate in tc's syntax (e.g. "1mbit"); zero means unset.
type Netem struct {
	DelayUS  int64   `json:"delay_us,omitempty"`
	JitterUS int64   `json:"jitter_us,omitempty"`
	LossPct  float64 `json:"loss_pct,omitempty"`
	Rate     string  `json:"rate,omitempty"`
}

// Describe is a fault in one line: "partition pg-1 <-> pg-2,pg-3".
func (f Fault) Describe() string {
	names := func(ms []Member) string {
		s := []string{}
		for _, m := range ms {
			s = append(s, m.Name)
		}
		return strings.Join(s, ",")
	}
	switch f.Kind {
	case FaultPartition:
		arrow := "<->"
		if f.OneWay {
			arrow = "->"
		}
		return fmt.Sprintf("partition %s %s %s", names(f.A), arrow, names(f.B))
	case FaultDegrade:
		return fmt.Sprintf("degrade %s %s", names(f.A), f.Netem.Args())
	}
	return f.Kind + " " + names(f.A)
}

// Args is the netem option list as tc takes it.
func (n *Netem) Args() []string {
	a := []string{}
	if n.DelayUS > 0 {
		a = append(a, "delay", fmt.Sprintf("%dus", n.DelayUS))
		if n.JitterUS > 0 {
			a = append(a, fmt.Sprintf("%dus", n.JitterUS))
		}
	}
	if n.LossPct > 0 {
		a = append(a, "loss", fmt.Sprintf("%g%%", n.LossPct))
	}
	if n.Rate != "" {
		a = append(a, "rate", n.Rate)
	}
	return a
}

// FaultsPath is <StateDir>/faults.json.
func (h *Host) FaultsPath() string { return filepath.Join(h.StateDir, "faults.json") }

// ReadFaults returns the record, an empty one when there is none, and an
// integrity (7) error when it is damaged (never "no faults").
func (h *Host) ReadFaults() (*FaultRecord, error) {
	b, err := readOwnedMode(h.FaultsPath(), FaultsMode)
	if err != nil || b == nil {
		return &FaultRecord{Schema: FaultsSchema, Next: 1, Faults: []Fault{}}, err
	}
	var r FaultRecord
	if err := json.Unmarshal(b, &r); err != nil || r.Schema != FaultsSchema {
		return nil, exitcode.New(exitcode.Integrity, "fault record %s is damaged or of another schema than %s", h.FaultsPath(), FaultsSchema).
			WithReason("manifest_damaged").WithNext("nft list table bridge " + FaultTable(h.Bridge) + " # what the record enforced; then repair or move " + h.FaultsPath())
	}
	return &r, nil
}

// FaultsMode is the fault record's mode.
const FaultsMode = 0o644

// writeFaults writes the record (FaultsMode), or removes it when it holds no
// fault, releasing the state directory when Barn created it.
func (h *Host) writeFaults(r *FaultRecord) error {
	if len(r.Faults) == 0 {
		if err := os.Remove(h.FaultsPath()); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		_, err := h.releaseStateDir()
		return err
	}
	b, err := wire.MarshalIndent(r)
	if err != nil {
		return err
	}
	if err := h.ensureStateDir(); err != nil {
		return err
	}
	return writeAtomic(h.FaultsPath(), append(b, '\n'), FaultsMode)
}

// checkMembers refuses an address outside the network's /24, the host's
// own address, and a node named twice.
func checkMembers(m *Manifest, groups ...[]Member) error {
	prefix, err := netip.ParsePrefix(m.CIDR)
	if err != nil {
		return exitcode.New(exitcode.Integrity, "the network manifest's cidr %q does not parse", m.CIDR).WithReason("manifest_damaged")
	}
	seen := map[string]bool{}
	for _, g := range groups {
		if len(g) == 0 {
			return exitcode.New(exitcode.Usage, "a fault needs at least one node in every group").WithReason("bad_fault")
		}
		for _, x := range g {
			a, err := netip.ParseAddr(x.Address)
			if err != nil || !prefix.Contains(a) || x.Address == m.HostAddress {
				return exitcode.New(exitcode.Usage, "%s (%s) is not a node address on %s (%s)", x.Name, x.Address, m.Bridge, m.CIDR).WithReason("bad_fault")
			}
			if seen[x.Address] {
				return exitcode.New(exitcode.Usage, "%s (%s) is named twice; a node is in one group only", x.Name, x.Address).WithReason("bad_fault")
			}
			seen[x.Address] = true
		}
	}
	return nil
}

// degraded reports whether a recorded fault already degrades address.
func (r *FaultRecord) degraded(address string) (string, bool) {
	for _, f := range r.Faults {
		if f.Kind == FaultDegrade && slices.ContainsFunc(f.A, func(m Member) bool { return m.Address == address }) {
			return f.ID, true
		}
	}
	return "", false
}
