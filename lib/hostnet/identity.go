package hostnet

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"barn.dev/lib/exitcode"
)

// Identity of what Barn creates. A name proves nothing: after a reboot, or
// after someone deletes Barn's bridge, another link (or NetworkManager
// connection) can carry the same name. So the manifest records, before the
// change is made, how Barn marks what it creates, and after it what the
// kernel or NetworkManager assigned; every undo compares all of it first
// and deletes only on a full match, by ifindex or UUID, never by name.
//
//	netlink      the bridge's MAC (02:…, derived from the install ID) and its
//	             IFLA_IFALIAS "barn <install id>", both set by Barn; then its
//	             ifindex with the boot it was observed in
//	networkd     the MAC Barn writes in its .netdev (MACAddress=, derived from
//	             the bridge name and /24); then ifindex and boot likewise
//	networkmanager  the connection's UUID (chosen by Barn, recorded, then passed
//	             to nmcli connection add as connection.uuid), its name and
//	             type bridge; and the lasting mark the connection gives its
//	             bridge, bridge.mac-address = BridgeMAC, so the link (whose
//	             ifindex changes at every activation, so none is pinned) is
//	             judged by name and MAC, also once the connection is gone
//
// An ifindex is compared only within the boot it was observed in (the
// kernel numbers links afresh at every boot).
//
// BridgeMAC depends only on the bridge name and the /24, so it also marks
// what an install left without a manifest counting it (a connection
// NetworkManager added after install gave up waiting and rolled back): the
// next install, which knows both, judges such a leftover Barn's by name,
// type bridge and that MAC, and removes it first (leftover.go); anything
// else of Barn's name stays foreign.

// Created records the identity of what Barn created.
type Created struct {
	Bridge       *LinkIdentity `json:"bridge,omitempty"`
	NMConnection *NMConnection `json:"nm_connection,omitempty"`
}

// LinkIdentity is how Barn recognises the bridge it created.
type LinkIdentity struct {
	Name   string `json:"name"`
	MAC    string `json:"mac"`
	Alias  string `json:"alias,omitempty"`   // "" when the backend sets none (networkd)
	Index  int    `json:"ifindex,omitempty"` // 0 until observed after the change
	BootID string `json:"boot_id,omitempty"` // the boot Index was observed in
}

// NMConnection is the NetworkManager connection Barn added.
type NMConnection struct {
	UUID string `json:"uuid"`
	Name string `json:"name"`
}

// newInstallID returns 16 random hex digits.
func newInstallID() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating an install ID: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// derivedMAC returns a locally administered unicast MAC (02:… or another
// first octet with those bits) derived from seed.
func derivedMAC(seed string) string {
	sum := sha256.Sum256([]byte("barn-net bridge " + seed))
	sum[0] = sum[0]&0xfc | 0x02
	return net.HardwareAddr(sum[:6]).String()
}

// netlinkIdentity is the intent recorded before the netlink bridge exists.
func netlinkIdentity(bridge, installID string) *LinkIdentity {
	return &LinkIdentity{Name: bridge, MAC: derivedMAC(installID), Alias: "barn " + installID}
}

// BridgeMAC is the MAC Barn gives the bridge named bridge on sn with the
// networkd and NetworkManager backends: the .netdev's MACAddress= and the
// connection's bridge.mac-address (a locally administered 02:… address).
func BridgeMAC(bridge string, sn Subnet) string { return derivedMAC(bridge + " " + sn.String()) }

// bootID is the kernel's boot ID ("" when unreadable).
func (h *Host) bootID() string {
	b, err := os.ReadFile(filepath.Join(h.procDir(), "sys", "kernel", "random", "boot_id"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// differences lists how l differs from the identity (empty: it is the
// bridge Barn created). An empty alias is accepted only before the
// ifindex was observed: the window between creating the bridge and
// setting its alias.
func (id *LinkIdentity) differences(l LinkInfo, boot string) []string {
	var d []string
	if l.Kind != "bridge" {
		d = append(d, fmt.Sprintf("it is a %s link, not a bridge", l.Kind))
	}
	if !strings.EqualFold(l.MAC, id.MAC) {
		d = append(d, fmt.Sprintf("MAC %s, recorded %s", l.MAC, id.MAC))
	}
	if id.Alias != "" && l.Alias != id.Alias && (id.Index != 0 || l.Alias != "") {
		d = append(d, fmt.Sprintf("alias %q, recorded %q", l.Alias, id.Alias))
	}
	if id.Index != 0 && id.BootID != "" && id.BootID == boot && l.Index != id.Index {
		d = append(d, fmt.Sprintf("ifindex %d, recorded %d", l.Index, id.Index))
	}
	return d
}

// bridgeVerdict says whether the link named like Barn's bridge is Barn's.
type bridgeVerdict struct {
	Link  *LinkInfo // nil: no link of that name
	Diffs []string  // non-empty: not provably Barn's
}

// foreign reports a present link that is not provably Barn's.
func (v bridgeVerdict) foreign() bool { return v.Link != nil && len(v.Diffs) > 0 }

// judgeBridge compares the link named name in links with the manifest's
// recorded identity (nil: none recorded, so nothing of that name is provably Barn's).
func (h *Host) judgeBridge(id *LinkIdentity, name string, links []LinkInfo) bridgeVerdict {
	for i := range links {
		if links[i].Name != name {
			continue
		}
		if id == nil {
			return bridgeVerdict{Link: &links[i], Diffs: []string{"the manifest records no identity for it"}}
		}
		return bridgeVerdict{Link: &links[i], Diffs: id.differences(links[i], h.bootID())}
	}
	return bridgeVerdict{}
}

// notBarnsError is the refusal for a link of Barn's name that is not Barn's.
func notBarnsError(name string, v bridgeVerdict) error {
	return exitcode.New(exitcode.Conflict, "%s is not the bridge Barn created (%s); Barn deletes only a link it can prove it created",
		name, strings.Join(v.Diffs, "; ")).WithReason("bridge_foreign").
		WithNext("ip -d link show " + name).WithDetail(map[string]any{"link": name, "differences": v.Diffs})
}

// pinBridge completes the recorded identity once the bridge exists: its
// ifindex and the boot it was observed in. It only ever pins a link that
// matches the recorded MAC and alias.
func (h *Host) pinBridge(m *Manifest) error {
	id := m.Created.Bridge
	// NetworkManager makes the bridge anew at each activation of the
	// connection (nmcli connection down/up), so its ifindex is no mark.
	if id == nil || id.Index != 0 || m.Backend == BackendNetworkManager {
		return nil
	}
	links, err := h.Link.Links()
	if err != nil {
		return err
	}
	for _, l := range links {
		if l.Name == id.Name && strings.EqualFold(l.MAC, id.MAC) && (id.Alias == "" || l.Alias == id.Alias) {
			id.Index, id.BootID = l.Index, h.bootID()
		}
	}
	return nil
}
