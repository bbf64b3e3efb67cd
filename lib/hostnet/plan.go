package hostnet

import (
	"fmt"
	"io"
	"strings"
)

// PlanSchema is the schema of a plan document.
const PlanSchema = "barn.net.plan/v1"

// Backends.
const (
	BackendNetlink        = "netlink"
	BackendNetworkManager = "networkmanager"
	BackendNetworkd       = "networkd"
	BackendVmnet          = "vmnet"
)

// Step kinds: the closed set the Runner knows how to apply and undo.
const (
	KindManifest    = "write-manifest" // write the manifest with the prestate (undo: remove it)
	KindBridgeAdd   = "bridge-add"     // create bridge Link (undo: delete it)
	KindAddrAdd     = "addr-add"       // add Address to Link (undo: remove it)
	KindLinkUp      = "link-up"        // bring Link up (undo: nothing; the bridge is deleted)
	KindMkdir       = "mkdir"          // create directory Path with Mode (undo: remove it if empty)
	KindWriteFile   = "write-file"     // write Content to Path with Mode (undo: restore Prev exactly)
	KindChmod       = "chmod"          // set Mode on Path (undo: restore Prev.Mode)
	KindCommand     = "command"        // run Argv (undo: run UndoArgv when set)
	KindAttachProof = "attach-proof"   // readiness: a QEMU NIC attaches through the helper (no undo)
	// NetworkManager: add records the connection's UUID (undo: delete that
	// UUID once it is still Barn's bridge connection); up activates it by UUID.
	KindNMAdd = "nm-connection-add"
	KindNMUp  = "nm-connection-up"
	// What an earlier install left that carries Barn's mark (leftover.go):
	// the connection UUID (deactivated, deleted, its bridge deleted) and a
	// bridge Link with BridgeMAC (deleted by ifindex). No undo: Barn
	// removes its own leftover, it restores nothing.
	KindNMLeftover   = "nm-leftover-delete"
	KindLinkLeftover = "bridge-leftover-delete"
	// systemd units (Unit, with Was its recorded prestate): start/enable
	// (undo: stop/disable only while the unit is still active/enabled as
	// Barn left it; nothing when it is already Was; any other state refused).
	KindUnitStart  = "unit-start"
	KindUnitEnable = "unit-enable"
	// networkctl reload (undo: networkctl delete the bridge's ifindex once
	// the link is proven to be the one Barn's .netdev made).
	KindNetworkdReload = "networkd-reload"
)

// Step is one typed change. Which fields matter depends on Kind.
type Step struct {
	ID       string     `json:"id"`
	Kind     string     `json:"kind"`
	Summary  string     `json:"summary"`
	Link     string     `json:"link,omitempty"`
	Address  string     `json:"address,omitempty"`
	Path     string     `json:"path,omitempty"`
	Mode     string     `json:"mode,omitempty"`
	Content  string     `json:"content,omitempty"`
	Prev     *FileState `json:"prev,omitempty"`
	Argv     []string   `json:"argv,omitempty"`
	UndoArgv []string   `json:"undo_argv,omitempty"`
	Unit     string     `json:"unit,omitempty"` // a systemd unit (unit-start, unit-enable)
	Was      string     `json:"was,omitempty"`  // the unit's recorded state before install
	UUID     string     `json:"uuid,omitempty"` // a NetworkManager connection (nm-leftover-delete)
}

// Plan is what install would do, computed from an observed host state.
type Plan struct {
	Schema      string   `json:"schema"`
	Action      string   `json:"action"` // install | uninstall
	Backend     string   `json:"backend"`
	Bridge      string   `json:"bridge"`
	CIDR        string   `json:"cidr"`
	HostAddress string   `json:"host_address"`
	Helper      string   `json:"helper"`
	Manifest    string   `json:"manifest"`
	Noop        bool     `json:"noop"`     // already installed exactly like this
	Verified    bool     `json:"verified"` // false: the backend cannot be run on this machine (vmnet)
	Notes       []string `json:"notes"`
	Steps       []Step   `json:"steps"`
	// QEMUNetdev is the -netdev argument a node's private NIC uses.
	QEMUNetdev string `json:"qemu_netdev"`
}

// RenderText prints the plan as numbered steps under one line naming the
// network (or, for an uninstall with no manifest, that nothing is installed).
func (p Plan) RenderText(w io.Writer) error {
	var b strings.Builder
	switch {
	case p.Action == "uninstall" && p.Noop:
		// no manifest: there is no recorded network to describe
		b.WriteString("uninstall: nothing to remove: no Barn network is installed here\n")
	case p.Noop:
		fmt.Fprintf(&b, "%s %s: backend %s, bridge %s, host address %s\n", p.Action, p.CIDR, p.Backend, p.Bridge, p.HostAddress)
		b.WriteString("nothing to do: the network is installed and ready\n")
	default:
		fmt.Fprintf(&b, "%s %s: backend %s, bridge %s, host address %s\n", p.Action, p.CIDR, p.Backend, p.Bridge, p.HostAddress)
	}
	if !p.Verified {
		b.WriteString("UNVERIFIED: this backend cannot run on this machine; the plan is golden-tested only\n")
	}
	for i, s := range p.Steps {
		fmt.Fprintf(&b, "%2d. %s\n", i+1, s.Summary)
	}
	for _, n := range p.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (p *Plan) add(s Step) { p.Steps = append(p.Steps, s) }
