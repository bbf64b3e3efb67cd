package hostnet

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"barn.dev/lib/exitcode"
)

// Leftovers: what an earlier install left on the host with no manifest
// counting it. NetworkManager can finish an add after install gave up
// waiting for it and rolled back (nmAddWait), and a crash or a failed undo
// can leave Barn's bridge link after its connection went. Each carries
// Barn's lasting mark, BridgeMAC of the bridge name and /24 (identity.go),
// so the next install, which knows both, recognises it by name, type
// bridge and that MAC, and removes it first, in steps of the printed plan;
// a connection must also have a UUID Barn recorded before handing it to
// nmcli (the ledger, ledger.go), since anyone can copy the mark. Anything
// of Barn's name that fails either stays foreign (bridge_foreign).

// isLeftoverConn reports whether c is a bridge connection named br that
// carries Barn's mark for sn and a UUID the ledger l records.
func isLeftoverConn(c NMConn, br string, sn Subnet, l Ledger) bool {
	return c.Name == br && c.Type == "bridge" && strings.EqualFold(c.MAC, BridgeMAC(br, sn)) && l.Has(c.UUID)
}

// isLeftoverLink reports whether l is a bridge named br with Barn's MAC for sn.
func isLeftoverLink(l LinkInfo, br string, sn Subnet) bool {
	return l.Name == br && l.Kind == "bridge" && strings.EqualFold(l.MAC, BridgeMAC(br, sn))
}

// planLeftovers adds the removal of Barn's leftovers: each marked
// connection (which takes its bridge with it), else a marked bridge. It
// refuses (conflict "bridge_in_use") while links are attached to such a bridge.
func (h *Host) planLeftovers(p *Plan, o Observed, sn Subnet) error {
	br, mac := h.bridge(), BridgeMAC(h.bridge(), sn)
	var steps []Step
	for _, c := range o.NM.Connections {
		if isLeftoverConn(c, br, sn, o.NM.Ledger) {
			steps = append(steps, Step{ID: "nm-leftover-delete-" + c.UUID, Kind: KindNMLeftover, Link: br, UUID: c.UUID,
				Summary: fmt.Sprintf("remove the connection %s (%s) an earlier install left (bridge.mac-address %s is Barn's mark): nmcli connection down and delete uuid %s, then its bridge %s while it has that MAC", c.UUID, br, mac, c.UUID, br)})
		}
	}
	if len(steps) == 0 && slices.ContainsFunc(o.Links, func(l LinkInfo) bool { return isLeftoverLink(l, br, sn) }) {
		steps = append(steps, Step{ID: "bridge-leftover-delete", Kind: KindLinkLeftover, Link: br,
			Summary: fmt.Sprintf("delete the bridge %s an earlier install left (MAC %s is Barn's mark), by its ifindex", br, mac)})
	}
	if len(steps) > 0 {
		if att := o.Attached(br); len(att) > 0 {
			return exitcode.New(exitcode.Conflict, "the bridge %s an earlier install left still has attached links (%s); stop the VMs that use it first", br, strings.Join(att, ", ")).
				WithReason("bridge_in_use").WithNext("ip link show master " + br)
		}
	}
	for _, s := range steps {
		p.add(s)
	}
	return nil
}

// removeLeftover applies a leftover step of plan p, judging the mark again
// right before it acts. A leftover connection zoned trusted that was active
// on the bridge also loses the runtime binding it gave firewalld
// (releaseTrustedZone); an inactive one gave none (NetworkManager binds the
// zone while a connection is active), so a binding there is the user's
// and stays.
func (h *Host) removeLeftover(ctx context.Context, p *Plan, s Step) error {
	sn := mustSubnet(p.CIDR)
	mac := BridgeMAC(s.Link, sn)
	if s.Kind == KindLinkLeftover {
		return h.removeMarkedBridge(ctx, s.Link, mac)
	}
	conns, err := h.nmConnections(ctx)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(conns, func(c NMConn) bool { return strings.EqualFold(c.UUID, s.UUID) })
	if i < 0 { // gone meanwhile: listed when planned, so its record goes too
		if err := h.ledgerSettle(s.UUID, true); err != nil {
			return err
		}
		return h.removeMarkedBridge(ctx, s.Link, mac)
	}
	c, err := h.nmMark(ctx, conns[i])
	if err != nil {
		return err
	}
	l, err := h.readLedger()
	if err != nil {
		return err
	}
	if !isLeftoverConn(c, s.Link, sn, l) {
		return exitcode.New(exitcode.Conflict, "connection %s (%s) is no longer Barn's leftover (bridge.mac-address %q, want %s; its UUID in %s: %v)", c.UUID, c.Name, c.MAC, mac, h.LedgerPath(), l.Has(c.UUID)).
			WithReason("stale_plan").WithNext("barn-net plan")
	}
	if err := h.removeNMConnection(ctx, c.UUID, s.Link, mac); err != nil {
		return err
	}
	if c.Zone == "trusted" && c.Active {
		return h.releaseTrustedZone(ctx, s.Link, "")
	}
	return nil
}

// prestateZone is the runtime firewalld zone of the bridge's name to
// record before install: none when the binding is to trusted and comes
// from a leftover connection of Barn's (zoned trusted, active) that
// install removes.
func prestateZone(o Observed, p Plan) string {
	for _, s := range p.Steps {
		for _, c := range o.NM.Connections {
			if s.Kind == KindNMLeftover && c.UUID == s.UUID && c.Zone == "trusted" && c.Active && o.NM.BridgeZone == "trusted" {
				return ""
			}
		}
	}
	return o.NM.BridgeZone
}
