package hostnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"barn.dev/lib/exitcode"
)

// Address guard: before a node's QEMU joins the bridge, the host proves
// that nobody else on that bridge holds the node's private address or its
// MAC. Two labs (two BARN_HOMEs) built from the same inventory derive the
// same address and the same MAC (lib/inventory.MACs); without this check
// both guests come up and traffic splits between them.
//
// Three independent sources, all read on the host:
//
//   - the host's processes (Linux /proc): a running QEMU whose command line
//     gives a NIC the node's MAC holds it from its first instant, before
//     its guest sends anything (a quiet guest, one still booting);
//   - the bridge's forwarding database (an unprivileged netlink dump): a
//     learned entry for the node's MAC on any port means a running NIC
//     already uses it;
//   - ARP duplicate address detection (RFC 5227 §2.1.1 probes: ARP
//     requests with sender IP 0.0.0.0, target the node's address, sent on
//     the bridge through an AF_PACKET socket). Any ARP packet whose sender
//     IP is the address, or another host's probe for it, is a holder. It
//     needs CAP_NET_RAW; without it the probe is reported as not run
//     (AddressCheck.ProbeSkipped) and only the MAC table decides.

// Probe are the ARP probe's timings. RFC 5227 §1.1 (PROBE_NUM 3, PROBE_MIN
// 1 s, ANNOUNCE_WAIT 2 s) is for a host about to claim the address; the
// host here only asks whether a neighbour answers, so the defaults are
// shorter: 3 probes 200 ms apart, then 1 s for a late answer. An answer
// ends the probe at once; only "free" waits out the window.
type Probe struct {
	Count    int           // probes sent; 0 means 3
	Interval time.Duration // between probes; 0 means 200 ms
	Wait     time.Duration // after the last probe; 0 means 1 s
}

func (p Probe) norm() Probe {
	if p.Count <= 0 {
		p.Count = 3
	}
	if p.Interval <= 0 {
		p.Interval = 200 * time.Millisecond
	}
	if p.Wait <= 0 {
		p.Wait = time.Second
	}
	return p
}

// Holder is who answered for an address on the bridge.
type Holder struct {
	Address string `json:"address"` // the node's IPv4 address
	MAC     string `json:"mac"`     // the hardware address that answered or is learned
	How     string `json:"how"`     // "process" (a running QEMU is given the MAC), "arp" (answered the probe) or "fdb" (the bridge learned the MAC)
	Port    string `json:"port,omitempty"`
	PID     int    `json:"pid,omitempty"`     // "process": the process
	Command string `json:"command,omitempty"` // "process": its name (comm)
}

// AddressCheck is what CheckAddress saw.
type AddressCheck struct {
	Holder       *Holder // nil: nobody holds the address or the MAC
	ProbeSkipped error   // why the ARP probe did not run (no CAP_NET_RAW); nil when it ran
}

// errNoRaw marks a probe that could not open its AF_PACKET socket for lack
// of privilege.
var errNoRaw = errors.New("the ARP probe needs CAP_NET_RAW")

// CheckAddress looks for a holder of addr or mac on bridge: first the
// host's processes (a QEMU given the MAC), then the ARP probe (the answer
// names the MAC that holds the address), then the bridge's MAC table (a
// quiet guest, or no CAP_NET_RAW). Errors are runtime failures of the
// check itself (bridge missing, socket errors), never a verdict. Hold
// LockAttach across the check and the start it guards.
func CheckAddress(ctx context.Context, bridge, addr, mac string, p Probe) (AddressCheck, error) {
	ip, err := netip.ParseAddr(addr)
	if err != nil || !ip.Is4() {
		return AddressCheck{}, fmt.Errorf("address %q is not IPv4", addr)
	}
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return AddressCheck{}, fmt.Errorf("MAC %q: %w", mac, err)
	}
	if h, err := processHolder(addr, bridge, hw); err != nil || h != nil {
		return AddressCheck{Holder: h}, err
	}
	var c AddressCheck
	h, err := probeARP(ctx, bridge, ip, p.norm())
	switch {
	case errors.Is(err, errNoRaw):
		c.ProbeSkipped = err
	case err != nil:
		return AddressCheck{}, err
	case h != nil:
		return AddressCheck{Holder: h}, nil
	}
	port, found, err := bridgeLearned(bridge, hw)
	if err != nil {
		return AddressCheck{}, err
	}
	if found {
		c.Holder = &Holder{Address: addr, MAC: hw.String(), How: "fdb", Port: port}
	}
	return c, nil
}

// AddressInUse is the refusal for node whose address or MAC h holds on
// bridge: resource (6), reason address_in_use, naming both and the way
// out. Detail is h.
func AddressInUse(node, bridge, mac string, h *Holder) *exitcode.Error {
	var what string
	switch h.How {
	case "process":
		what = fmt.Sprintf("process %d (%s) already gives a NIC its MAC %s", h.PID, h.Command, h.MAC)
	case "fdb":
		what = fmt.Sprintf("the bridge already carries its MAC %s (learned on port %s)", h.MAC, h.Port)
	default:
		what = fmt.Sprintf("MAC %s answered an ARP probe for it", h.MAC)
	}
	if (h.How == "arp" || h.How == "process") && h.MAC == mac {
		what += " (the same MAC Barn derives for this node: most likely another Barn lab from the same inventory)"
	}
	find := fmt.Sprintf("ip neigh show %s dev %s", h.Address, bridge)
	if h.How == "process" {
		find = fmt.Sprintf("ps -o user=,pid=,args= -p %d", h.PID)
	}
	return exitcode.New(exitcode.Resource, "%s: address %s is already in use on %s: %s; not starting %s",
		node, h.Address, bridge, what, node).
		WithReason("address_in_use").
		WithNext(find + "   # find who holds it; stop that lab, or give this inventory its own /24 (see README: two labs on one host)").
		WithDetail(h)
}
