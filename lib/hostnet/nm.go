package hostnet

import (
	"fmt"
	"strings"

	"barn.dev/lib/exitcode"
)

// planNM adds the NetworkManager steps: an owned bridge connection (in the
// firewalld "trusted" zone when firewalld is active), brought up.
func (h *Host) planNM(p *Plan, o Observed, sn Subnet) error {
	br := h.bridge()
	if !o.NM.Running {
		return exitcode.New(exitcode.Capability, "NetworkManager is not running on this host; use --backend auto").WithReason("backend_unavailable").WithNext("barn-net plan")
	}
	for _, c := range o.NM.Connections {
		if c == br {
			return exitcode.New(exitcode.Conflict, "NetworkManager already has a connection named %s and no Barn manifest records it; refusing to adopt it", br).
				WithReason("bridge_foreign").WithNext("nmcli connection show " + br)
		}
	}
	add := []string{"nmcli", "connection", "add", "type", "bridge", "con-name", br, "ifname", br,
		"ipv4.method", "manual", "ipv4.addresses", sn.HostCIDR(), "ipv6.method", "disabled",
		"bridge.stp", "no", "connection.autoconnect", "yes"}
	if o.NM.Firewalld {
		add = append(add, "connection.zone", "trusted")
	}
	p.add(Step{ID: "nm-connection-add", Kind: KindCommand, Argv: add, UndoArgv: []string{"nmcli", "connection", "delete", br},
		Summary: strings.Join(add, " ")})
	p.add(Step{ID: "nm-connection-up", Kind: KindCommand, Argv: []string{"nmcli", "connection", "up", br},
		Summary: fmt.Sprintf("nmcli connection up %s", br)})
	if o.NM.Firewalld {
		p.Notes = append(p.Notes, "firewalld is active: the bridge joins the trusted zone")
	}
	return nil
}
