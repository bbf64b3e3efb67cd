package hostnet

import (
	"slices"
	"strings"
)

// A crash (kill -9, power cut) can stop barn-net between a step's effect
// and the manifest write that counts it: the manifest then says Applied=i
// while step i (0-based) already took effect. settleInFlight counts that
// step as applied when the host shows Barn's effect of it, so uninstall and
// rollback undo it too and never leave an orphan; when the host shows no
// such effect the step did not happen and nothing changes. Only an
// install that had not finished (status installing) has a step in flight.
//
// Evidence, per kind (what is judged is what undoCheck judges later):
//
//	write-manifest      the manifest exists (it is what is being read)
//	write-file          the file has exactly the content Barn planned, or
//	                    (bridge.conf) holds this install's block intact
//	mkdir               the directory exists
//	chmod               the path has the mode Barn planned
//	nm-connection-add   a connection with the UUID recorded before the add
//	bridge-add, networkd-reload  a link of Barn's name with the recorded identity
//	addr-add            Barn's bridge holds the address
//	unit-start/enable   the unit is active/enabled and was not before install
//
// Other kinds have no undo. A vmnet command step (darwin) is never
// settled: its recorded undo command acts without a judgement.
func (h *Host) settleInFlight(m *Manifest, now hostNow) {
	if m == nil || m.Status != StatusInstalling || m.Applied >= len(m.Steps) {
		return
	}
	if h.inFlightDone(m, m.Steps[m.Applied], now) {
		m.Applied++
	}
}

func (h *Host) inFlightDone(m *Manifest, s Step, now hostNow) bool {
	switch s.Kind {
	case KindManifest:
		return true
	case KindWriteFile:
		cur, err := StatFile(s.Path, s.Path == h.BridgeConf())
		if err != nil || !cur.Exists {
			return false
		}
		if cur.SHA256 == digest([]byte(s.Content)) {
			return true
		}
		// bridge.conf: later installs may have appended their blocks since
		own, ok := lastBlock(s.Content)
		acl := ParseACL(cur.Content, own.Bridge)
		return ok && s.Path == h.BridgeConf() && acl.BlockIntact && acl.Manifest == own.Manifest
	case KindMkdir:
		cur, err := StatFile(s.Path, false)
		return err == nil && cur.Exists && cur.Dir
	case KindChmod:
		cur, err := StatFile(s.Path, false)
		return err == nil && cur.Exists && cur.Mode == s.Mode
	case KindNMAdd:
		rec := m.Created.NMConnection
		return rec != nil && slices.ContainsFunc(now.conns, func(c NMConn) bool { return strings.EqualFold(c.UUID, rec.UUID) })
	case KindBridgeAdd, KindNetworkdReload:
		v := h.judgeBridge(m.Created.Bridge, s.Link, now.links)
		return v.Link != nil && !v.foreign()
	case KindAddrAdd:
		v := h.judgeBridge(m.Created.Bridge, s.Link, now.links)
		return v.Link != nil && !v.foreign() && slices.Contains(v.Link.Addrs, s.Address)
	case KindUnitStart:
		return now.units[s.Unit].Active == "active" && s.Was != "active"
	case KindUnitEnable:
		return now.units[s.Unit].Enabled == "enabled" && s.Was != "enabled"
	}
	return false
}

// sameAsPrev reports whether a file is as recorded before install (an undo
// that already restored it, or a write that never happened).
func sameAsPrev(cur FileState, prev *FileState) bool {
	if prev == nil || !prev.Exists {
		return !cur.Exists
	}
	return cur.Exists && cur.SHA256 == prev.SHA256
}
