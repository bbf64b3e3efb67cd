package hostnet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"barn.dev/lib/exitcode"
)

// NMConn is one NetworkManager connection profile as nmcli lists it.
type NMConn struct {
	Name string `json:"name"`
	UUID string `json:"uuid"`
	Type string `json:"type"`
	// Read only for a bridge connection of Barn's bridge name (nmMark):
	// its bridge.mac-address (Barn's mark: BridgeMAC) and connection.zone.
	MAC  string `json:"mac,omitempty"`
	Zone string `json:"zone,omitempty"`
	// Active: NetworkManager has it on a device (nmDevices).
	Active bool `json:"active,omitempty"`
}

// planNM adds the NetworkManager steps: an owned bridge connection (in the
// firewalld "trusted" zone when firewalld is active), brought up. The
// connection's UUID is chosen by Apply and recorded in the manifest before
// the add (which passes it as connection.uuid), so a crash right after the
// add leaves a connection uninstall recognises; up and the undo use that
// UUID, never the name (NetworkManager allows several connections of one
// name). The connection sets bridge.mac-address to BridgeMAC, the lasting
// mark by which a leftover bridge or connection is judged Barn's once no
// manifest counts it (identity.go). A connection of Barn's name without
// that mark is foreign: refused.
func (h *Host) planNM(p *Plan, o Observed, sn Subnet) error {
	br := h.bridge()
	if !o.NM.Running {
		return exitcode.New(exitcode.Capability, "NetworkManager is not running on this host; use --backend auto").WithReason("backend_unavailable").WithNext("barn-net plan")
	}
	for _, c := range o.NM.Connections {
		if c.Name == br && !isLeftoverConn(c, br, sn, o.NM.Ledger) {
			why := "neither a Barn manifest nor Barn's record of the UUIDs it chose (" + h.LedgerPath() + ") has it"
			if o.NM.Ledger.Has(c.UUID) {
				why = "Barn added it (" + h.LedgerPath() + " records its UUID), but not for " + sn.String() + ": its bridge.mac-address " + c.MAC + " is not " + BridgeMAC(br, sn)
			}
			return exitcode.New(exitcode.Conflict, "NetworkManager already has a connection named %s (%s) and %s; refusing to adopt it", br, c.UUID, why).
				WithReason("bridge_foreign").WithNext("nmcli connection show " + br)
		}
	}
	mac := BridgeMAC(br, sn)
	add := []string{"nmcli", "connection", "add", "type", "bridge", "con-name", br, "ifname", br,
		"ipv4.method", "manual", "ipv4.addresses", sn.HostCIDR(), "ipv6.method", "disabled",
		"bridge.stp", "no", "bridge.mac-address", mac, "connection.autoconnect", "yes"}
	if o.NM.Firewalld {
		add = append(add, "connection.zone", "trusted")
	}
	p.add(Step{ID: "nm-connection-add", Kind: KindNMAdd, Link: br, Argv: add,
		Summary: strings.Join(add, " ") + " connection.uuid <a UUID chosen and recorded in the manifest before the add; uninstall deletes that UUID only, then the bridge " + br + " only while it has the MAC " + mac + ">"})
	p.add(Step{ID: "nm-connection-up", Kind: KindNMUp, Link: br,
		Summary: fmt.Sprintf("nmcli connection up uuid <the recorded UUID> (%s)", br)})
	if o.NM.Firewalld {
		p.Notes = append(p.Notes, "firewalld is active: the bridge joins the trusted zone")
	}
	return nil
}

// nmConnections lists NetworkManager's connections, sorted by name, then
// UUID, without the ones it generated for devices configured outside it
// (nmDevice.external), each marked Active when a device has it.
func (h *Host) nmConnections(ctx context.Context) ([]NMConn, error) {
	out, err := h.run(ctx, "nmcli", "-t", "-f", "UUID,TYPE,NAME", "connection", "show")
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "listing NetworkManager connections").WithReason("host_inspection_failed")
	}
	conns := []NMConn{}
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		f := splitTerse(l)
		if len(f) != 3 {
			return nil, exitcode.New(exitcode.Runtime, "nmcli connection show: cannot read the line %q (want UUID:TYPE:NAME)", l).WithReason("host_inspection_failed")
		}
		conns = append(conns, NMConn{UUID: f[0], Type: f[1], Name: f[2]})
	}
	// NetworkManager's generated connection for a device configured
	// outside it is named after the device: no one's profile, never
	// judged by name.
	devs, err := h.nmDevices(ctx)
	if err != nil {
		return nil, err
	}
	for _, d := range devs {
		if d.external() {
			conns = slices.DeleteFunc(conns, func(c NMConn) bool { return strings.EqualFold(c.UUID, d.ConUUID) })
		}
		for i := range conns {
			if d.ConUUID != "" && strings.EqualFold(conns[i].UUID, d.ConUUID) {
				conns[i].Active = true
			}
		}
	}
	sort.Slice(conns, func(i, j int) bool {
		if conns[i].Name != conns[j].Name {
			return conns[i].Name < conns[j].Name
		}
		return conns[i].UUID < conns[j].UUID
	})
	return conns, nil
}

// nmMark completes c with its bridge.mac-address and connection.zone
// (nmcli -g, which escapes ':' in values as terse output does).
func (h *Host) nmMark(ctx context.Context, c NMConn) (NMConn, error) {
	for _, f := range []struct {
		prop string
		to   *string
	}{{"bridge.mac-address", &c.MAC}, {"connection.zone", &c.Zone}} {
		out, err := h.run(ctx, "nmcli", "-g", f.prop, "connection", "show", "uuid", c.UUID)
		if err != nil {
			return c, exitcode.Wrap(exitcode.Runtime, err, "reading %s of NetworkManager connection %s (%s): %s", f.prop, c.UUID, c.Name, firstLine(out)).WithReason("host_inspection_failed")
		}
		*f.to = strings.Join(splitTerse(firstLine(out)), ":")
	}
	return c, nil
}

// splitTerse splits one line of nmcli's terse output (-t): fields end at an
// unescaped ':', and '\' escapes ':' and '\' inside a value.
func splitTerse(line string) []string {
	var out []string
	var cur strings.Builder
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
		case c == ':':
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	return append(out, cur.String())
}

// nmAddWait bounds how long addNMConnection waits for NetworkManager to
// finish an add whose nmcli call timed out.
var nmAddWait = 2 * time.Minute

// addNMConnection runs the add with the UUID recorded before it
// (connection.uuid) and checks that NetworkManager now holds a connection
// of that UUID. When nmcli gives up with "Timeout was reached" (libnm's
// 25 s D-Bus timeout; NetworkManager still carries the add out, as the
// host-under-test guests showed under TCG), it waits up to nmAddWait,
// polling every second, for the connection to appear before failing.
func (h *Host) addNMConnection(ctx context.Context, s Step, uuid string) error {
	argv := append(slices.Clone(s.Argv), "connection.uuid", uuid)
	out, err := h.Runner.Run(ctx, argv)
	if err != nil && !strings.Contains(string(out), "Timeout was reached") {
		// NetworkManager refused the add: unless it lists the UUID after
		// all, it will never add it, and the ledger lets the UUID go.
		err = fmt.Errorf("%v: %w: %s", argv, err, firstLine(string(out)))
		conns, lerr := h.nmConnections(ctx)
		if lerr == nil && !slices.ContainsFunc(conns, func(c NMConn) bool { return strings.EqualFold(c.UUID, uuid) }) {
			lerr = h.ledgerSettle(uuid, true)
		}
		return errors.Join(err, lerr)
	}
	deadline := time.Now().Add(nmAddWait)
	for {
		conns, lerr := h.nmConnections(ctx)
		if lerr != nil {
			return lerr
		}
		if slices.ContainsFunc(conns, func(c NMConn) bool { return strings.EqualFold(c.UUID, uuid) }) {
			return h.ledgerSeen(uuid)
		}
		switch {
		case err == nil:
			return fmt.Errorf("nmcli added connection %s but NetworkManager lists no connection with the UUID %s Barn gave it", s.Link, uuid)
		case time.Now().After(deadline):
			return fmt.Errorf("%v: %w: %s; NetworkManager listed no connection %s within %s after that (should it still add it, its bridge.mac-address marks it Barn's and the next barn-net install removes it first)", argv, err, firstLine(string(out)), uuid, nmAddWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// nmLinkWait bounds how long waitLinkGone waits for a bridge to go.
var nmLinkWait = 2 * time.Minute

// removeNMConnection removes Barn's connection uuid and then Barn's
// bridge. While NetworkManager lists the connection it is first
// deactivated when active (nmcli connection down waits until NetworkManager
// has torn the device down), then deleted. The live host-under-test guest
// showed that deleting the still active connection made NetworkManager 1.42
// forget the device mid-teardown: the barn0 link stayed (down, with its
// address and route), nmcli device delete refused it, and firewalld's
// runtime trusted zone kept binding it. Whatever is left, the bridge goes
// by removeMarkedBridge (name and Barn's MAC), so a connection deleted
// earlier (a timed-out delete, a kill, an inactive connection) leaves
// nothing behind either.
func (h *Host) removeNMConnection(ctx context.Context, uuid, br, mac string) error {
	conns, err := h.nmConnections(ctx)
	if err != nil {
		return err
	}
	listed := slices.ContainsFunc(conns, func(c NMConn) bool { return strings.EqualFold(c.UUID, uuid) })
	if listed {
		out, err := h.run(ctx, "nmcli", "-t", "-f", "UUID", "connection", "show", "--active")
		if err != nil {
			return fmt.Errorf("listing NetworkManager's active connections: %w", err)
		}
		if slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool { return strings.EqualFold(strings.TrimSpace(l), uuid) }) {
			if err := h.command(ctx, "nmcli", "connection", "down", "uuid", uuid); err != nil {
				return err
			}
		}
		if err := h.command(ctx, "nmcli", "connection", "delete", "uuid", uuid); err != nil {
			return err
		}
	}
	if err := h.ledgerSettle(uuid, listed); err != nil {
		return err
	}
	if mac == "" {
		return nil // no mark recorded: no link is provably Barn's
	}
	return h.removeMarkedBridge(ctx, br, mac)
}

// removeMarkedBridge deletes the link named br when it is a bridge with
// the MAC mac (Barn's mark), by its ifindex, and waits, up to nmLinkWait,
// until no link is named br. A link of that name without the mark is not
// Barn's: it is left alone (bridge_foreign). Nor is one NetworkManager
// has a connection active on: the mark is a MAC anyone can reproduce, and
// Barn's own connection is deleted before this runs, so that connection
// is someone else's profile (a clone of Barn's, or one with
// interface-name br that took the device over), whose device it keeps
// (bridge_in_use).
func (h *Host) removeMarkedBridge(ctx context.Context, br, mac string) error {
	links, err := h.Link.Links()
	if err != nil {
		return err
	}
	id := &LinkIdentity{Name: br, MAC: mac}
	v := h.judgeBridge(id, br, links)
	if v.Link == nil {
		return nil
	}
	if v.foreign() {
		return notBarnsError(br, v)
	}
	if err := h.refuseActiveOn(ctx, br); err != nil {
		return err
	}
	if err := h.Link.DelLinkIndex(v.Link.Index); err != nil {
		if again, lerr := h.linkIndex(br); lerr != nil || again == v.Link.Index {
			return fmt.Errorf("deleting the bridge %s (ifindex %d, MAC %s): %w", br, v.Link.Index, mac, err)
		} // gone meanwhile (NetworkManager finished its own teardown)
	}
	return h.waitLinkGone(ctx, br)
}

// nmDevice is one line of `nmcli -t -f DEVICE,STATE,CON-UUID device`.
type nmDevice struct{ Name, State, ConUUID string }

// external reports whether d's connection is the one NetworkManager
// generates for a device configured outside it (states "connected
// (externally)" and the like): named after the device, no one's profile.
func (d nmDevice) external() bool {
	return d.ConUUID != "" && strings.HasSuffix(d.State, "(externally)")
}

// nmDevices lists NetworkManager's devices with their state and the UUID
// of the connection on each. A line it cannot read is an error, never
// "no device".
func (h *Host) nmDevices(ctx context.Context) ([]nmDevice, error) {
	out, err := h.run(ctx, "nmcli", "-t", "-f", "DEVICE,STATE,CON-UUID", "device")
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "listing NetworkManager's devices: %s", firstLine(out)).WithReason("host_inspection_failed")
	}
	var devs []nmDevice
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		f := splitTerse(l)
		if len(f) != 3 {
			return nil, exitcode.New(exitcode.Runtime, "nmcli device: cannot read the line %q (want DEVICE:STATE:CON-UUID)", l).WithReason("host_inspection_failed")
		}
		devs = append(devs, nmDevice{Name: f[0], State: f[1], ConUUID: f[2]})
	}
	return devs, nil
}

// refuseActiveOn fails (conflict "bridge_in_use") when NetworkManager has
// a profile on the device br: a connection other than its own external
// one (nmDevice.external), such as the one a deleted connection's link
// left up with its address. Nothing is on br when NetworkManager is not
// running.
func (h *Host) refuseActiveOn(ctx context.Context, br string) error {
	if out, err := h.run(ctx, "nmcli", "-t", "-f", "RUNNING", "general"); err != nil || out != "running" {
		return nil
	}
	devs, err := h.nmDevices(ctx)
	if err != nil {
		return err
	}
	for _, d := range devs {
		if d.Name == br && d.ConUUID != "" && !d.external() {
			return exitcode.New(exitcode.Conflict, "the bridge %s carries Barn's mark, but NetworkManager has the connection %s on it (%s), which is not Barn's: Barn leaves both alone (take that connection down, then run this again, to let Barn delete %s)", br, d.ConUUID, d.State, br).
				WithReason("bridge_in_use").WithNext("nmcli connection show uuid " + d.ConUUID)
		}
	}
	return nil
}

// linkIndex is the index of the link named name, or -1 when there is none.
func (h *Host) linkIndex(name string) (int, error) {
	links, err := h.Link.Links()
	if err != nil {
		return 0, err
	}
	for _, l := range links {
		if l.Name == name {
			return l.Index, nil
		}
	}
	return -1, nil
}

// waitLinkGone waits, polling every 200 ms up to nmLinkWait, until no link
// is named br.
func (h *Host) waitLinkGone(ctx context.Context, br string) error {
	deadline := time.Now().Add(nmLinkWait)
	for {
		index, err := h.linkIndex(br)
		if err != nil || index < 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("NetworkManager deleted Barn's connection but the bridge %s still exists %s later (see: nmcli device show %s)", br, nmLinkWait, br)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// newNMUUID returns a random (version 4) UUID for Barn's connection.
func newNMUUID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating a connection UUID: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	x := hex.EncodeToString(b)
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:], nil
}

// nmDifferences says whether NetworkManager holds the connection Barn
// recorded: present=false when no connection has its UUID or its name;
// diffs lists what is not Barn's (renamed, another type, another UUID
// under Barn's name).
func nmDifferences(rec *NMConnection, conns []NMConn) (present bool, diffs []string) {
	for _, c := range conns {
		if !strings.EqualFold(c.UUID, rec.UUID) {
			continue
		}
		if c.Name != rec.Name {
			diffs = append(diffs, fmt.Sprintf("it is now named %q, recorded %q", c.Name, rec.Name))
		}
		if c.Type != "bridge" {
			diffs = append(diffs, fmt.Sprintf("its type is %s, not bridge", c.Type))
		}
		return true, diffs
	}
	for _, c := range conns {
		if c.Name == rec.Name {
			return true, []string{fmt.Sprintf("it has UUID %s; the one Barn added, %s, is gone", c.UUID, rec.UUID)}
		}
	}
	return false, nil
}

// judgeNM compares NetworkManager's connections with the manifest's record.
func judgeNM(m *Manifest, conns []NMConn) (present bool, diffs []string) {
	rec := m.Created.NMConnection
	if rec == nil || rec.UUID == "" {
		for _, c := range conns {
			if c.Name == m.Bridge {
				return true, []string{"the manifest records no UUID for it (an add interrupted before it was recorded), so connection " + c.UUID + " is not provably Barn's"}
			}
		}
		return false, nil
	}
	return nmDifferences(rec, conns)
}
