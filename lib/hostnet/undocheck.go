package hostnet

import (
	"context"
	"slices"
	"strings"

	"barn.dev/lib/exitcode"
)

// hostNow is the part of the host an undo is judged on.
type hostNow struct {
	links []LinkInfo
	conns []NMConn
	units map[string]UnitState
	zone  string // firewalld's runtime zone of the bridge ("" none, or firewalld not running)
}

// nowOf is the hostNow of an Observed (PlanUninstall judges every step on it).
func nowOf(o Observed) hostNow {
	return hostNow{links: o.Links, conns: o.NM.Connections, units: o.Networkd.Units, zone: o.NM.BridgeZone}
}

// now reads what undoing s is judged on, right before the undo acts.
func (h *Host) now(ctx context.Context, s Step) (hostNow, error) {
	var n hostNow
	var err error
	switch s.Kind {
	case KindBridgeAdd, KindAddrAdd, KindNetworkdReload:
		n.links, err = h.Link.Links()
	case KindNMAdd:
		if n.conns, err = h.nmConnections(ctx); err == nil {
			n.links, err = h.Link.Links()
		}
		if err == nil && zoned(s) {
			n.zone, _, err = h.firewalldZone(ctx, s.Link, false)
		}
	case KindUnitStart, KindUnitEnable:
		verb := map[string]string{KindUnitStart: "is-active", KindUnitEnable: "is-enabled"}[s.Kind]
		var st string
		if st, err = h.unitState(ctx, verb, s.Unit); err == nil {
			n.units = map[string]UnitState{s.Unit: {Active: st, Enabled: st}}
		}
	}
	return n, err
}

// undoCheck judges undoing s on the host as now: skip when there is
// nothing to undo (the thing is gone, or already as recorded before
// install), else a refusal (conflict) when what is there is not provably
// what Barn created or not in the state Barn left it, naming what differs.
func (h *Host) undoCheck(m *Manifest, s Step, now hostNow) (skip bool, refusal error) {
	switch s.Kind {
	case KindBridgeAdd, KindNetworkdReload:
		v := h.judgeBridge(m.Created.Bridge, s.Link, now.links)
		if v.foreign() {
			return false, notBarnsError(s.Link, v)
		}
		return v.Link == nil, nil
	case KindAddrAdd:
		v := h.judgeBridge(m.Created.Bridge, s.Link, now.links)
		if v.foreign() {
			return false, notBarnsError(s.Link, v)
		}
		return v.Link == nil || !slices.Contains(v.Link.Addrs, s.Address), nil
	case KindNMAdd:
		present, diffs := judgeNM(m, now.conns)
		if len(diffs) > 0 {
			return false, exitcode.New(exitcode.Conflict, "NetworkManager connection %s is not the one Barn added (%s); Barn deletes only the connection it recorded",
				s.Link, strings.Join(diffs, "; ")).WithReason("nm_connection_foreign").WithNext("nmcli connection show " + s.Link).WithDetail(diffs)
		}
		// An undo stopped after the connection and bridge went (a kill, a
		// firewalld failure) has the trusted binding left to release.
		bound := zoned(s) && now.zone == "trusted" && m.Prestate.FirewalldZone != "trusted"
		if present || m.Created.Bridge == nil {
			return !present && !bound, nil
		}
		// The connection is gone (a delete that timed out or was killed,
		// or one made by hand): what is left to undo is the bridge it
		// made, when it still carries Barn's mark.
		v := h.judgeBridge(m.Created.Bridge, s.Link, now.links)
		if v.foreign() {
			return false, notBarnsError(s.Link, v)
		}
		return v.Link == nil && !bound, nil
	case KindWriteFile:
		return h.fileUndo(s)
	case KindChmod:
		return false, h.sharedModeInUse(m, s)
	case KindUnitStart, KindUnitEnable:
		u, ok := now.units[s.Unit]
		cur, left, verb := u.Active, "active", "is-active"
		if s.Kind == KindUnitEnable {
			cur, left, verb = u.Enabled, "enabled", "is-enabled"
		}
		switch {
		case ok && cur == left:
			return false, nil
		case ok && cur == s.Was:
			return true, nil
		}
		if !ok {
			cur = "unknown (systemctl did not answer)"
		}
		return false, exitcode.New(exitcode.Conflict, "%s is %s (%s): neither %s as Barn left it nor %s as recorded before install; Barn changes a unit only back from the state it left it in",
			s.Unit, cur, verb, left, s.Was).WithReason("unit_changed").WithNext("systemctl status " + s.Unit).
			WithDetail(map[string]string{"unit": s.Unit, "state": cur, "barn_left": left, "recorded": s.Was})
	}
	return false, nil
}

// zoned reports whether the NetworkManager add s put its bridge in
// firewalld's trusted zone (connection.zone trusted).
func zoned(s Step) bool { return slices.Contains(s.Argv, "connection.zone") }
