package hostnet

import (
	"fmt"
	"strings"

	"barn.dev/lib/exitcode"
)

// NetdevUnit is the owned 80-<bridge>.netdev.
func NetdevUnit(bridge string) string {
	return "# Managed by Barn (barn-net); removed by barn-net uninstall.\n[NetDev]\nName=" + bridge + "\nKind=bridge\n"
}

// NetworkUnit is the owned 80-<bridge>.network.
func NetworkUnit(bridge string, sn Subnet) string {
	return "# Managed by Barn (barn-net); removed by barn-net uninstall.\n[Match]\nName=" + bridge +
		"\n\n[Network]\nAddress=" + sn.HostCIDR() + "\nConfigureWithoutCarrier=yes\nLinkLocalAddressing=no\nIPv6AcceptRA=no\n\n[Link]\nRequiredForOnline=no\n"
}

// planNetworkd adds the systemd-networkd steps: owned .netdev/.network
// units, networkd started only when the activation-safety scan is clean,
// reload and reconfigure.
func (h *Host) planNetworkd(p *Plan, o Observed, sn Subnet) error {
	br := h.bridge()
	n := o.Networkd
	if !n.Booted {
		return exitcode.New(exitcode.Capability, "systemd is not PID 1 on this host, so systemd-networkd cannot manage %s; use --backend netlink", br).
			WithReason("backend_unavailable").WithNext("barn-net plan --backend netlink")
	}
	for _, f := range []FileState{n.Netdev, n.Net} {
		if f.Exists {
			return exitcode.New(exitcode.Conflict, "%s already exists and no Barn manifest records it; refusing to overwrite it", f.Path).
				WithReason("unit_foreign")
		}
	}
	active := n.Units["systemd-networkd.service"].Active == "active"
	if !active && len(n.Claims) > 0 {
		return exitcode.New(exitcode.Conflict, "systemd-networkd is inactive and starting it could reconfigure a real interface: %s", strings.Join(n.Claims, "; ")).
			WithReason("networkd_activation_unsafe").WithDetail(n.Claims)
	}
	if !n.Dir.Exists {
		p.add(Step{ID: "networkd-dir", Kind: KindMkdir, Path: h.NetworkdDir(), Mode: "0755", Summary: "create " + h.NetworkdDir() + " (0755)"})
	}
	nd, nw := n.Netdev, n.Net
	p.add(Step{ID: "netdev-unit", Kind: KindWriteFile, Path: nd.Path, Mode: "0644", Content: NetdevUnit(br), Prev: &nd,
		Summary: fmt.Sprintf("write %s (Kind=bridge)", nd.Path)})
	p.add(Step{ID: "network-unit", Kind: KindWriteFile, Path: nw.Path, Mode: "0644", Content: NetworkUnit(br, sn), Prev: &nw,
		Summary: fmt.Sprintf("write %s (Address=%s, ConfigureWithoutCarrier=yes, LinkLocalAddressing=no, IPv6AcceptRA=no, RequiredForOnline=no)", nw.Path, sn.HostCIDR())})
	if !active {
		p.add(Step{ID: "networkd-start", Kind: KindCommand, Argv: []string{"systemctl", "start", "systemd-networkd"},
			UndoArgv: []string{"systemctl", "stop", "systemd-networkd"}, Summary: "systemctl start systemd-networkd (activation scan found no unit that could claim a real link)"})
	}
	p.add(Step{ID: "networkd-reload", Kind: KindCommand, Argv: []string{"networkctl", "reload"},
		UndoArgv: []string{"networkctl", "delete", br}, Summary: "networkctl reload (undo: networkctl delete " + br + ")"})
	p.add(Step{ID: "networkd-reconfigure", Kind: KindCommand, Argv: []string{"networkctl", "reconfigure", br},
		Summary: "networkctl reconfigure " + br})
	return nil
}
