package hostnet

import (
	"fmt"
	"path/filepath"
	"strings"

	"barn.dev/lib/exitcode"
)

// NetdevUnit is the owned 80-<bridge>.netdev. MACAddress= marks the bridge
// networkd creates from it as Barn's (BridgeMAC).
func NetdevUnit(bridge string, sn Subnet) string {
	return "# Managed by Barn (barn-net); removed by barn-net uninstall.\n[NetDev]\nName=" + bridge + "\nKind=bridge\nMACAddress=" + BridgeMAC(bridge, sn) + "\n"
}

// networkdService is the unit Barn may start and enable; networkdSocket
// is the socket it requires, which Barn may start.
const (
	networkdService = "systemd-networkd.service"
	networkdSocket  = "systemd-networkd.socket"
)

// NetworkUnit is the owned 80-<bridge>.network.
func NetworkUnit(bridge string, sn Subnet) string {
	return "# Managed by Barn (barn-net); removed by barn-net uninstall.\n[Match]\nName=" + bridge +
		"\n\n[Network]\nAddress=" + sn.HostCIDR() + "\nConfigureWithoutCarrier=yes\nLinkLocalAddressing=no\nIPv6AcceptRA=no\n\n[Link]\nRequiredForOnline=no\n"
}

// planNetworkd adds the systemd-networkd steps: owned .netdev/.network
// units, networkd started only when the activation-safety scan is clean,
// reload and reconfigure. Undo stops networkd only when it is still active
// as Barn left it (and does nothing when it is already as recorded before
// install; any other state is refused), and deletes the bridge only when it
// carries the .netdev's MAC (and, within the boot it was observed in, the
// recorded ifindex), by that ifindex.
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
				WithReason("unit_foreign").WithNext("cat " + f.Path)
		}
	}
	active := n.Units[networkdService].Active == "active"
	if !active && len(n.Claims) > 0 {
		return exitcode.New(exitcode.Conflict, "systemd-networkd is inactive and starting it could reconfigure a real interface: %s", strings.Join(n.Claims, "; ")).
			WithReason("networkd_activation_unsafe").WithDetail(n.Claims).WithNext("barn-net plan --backend netlink")
	}
	if !n.Dir.Exists {
		p.add(Step{ID: "networkd-dir", Kind: KindMkdir, Path: h.NetworkdDir(), Mode: "0755", Summary: "create " + h.NetworkdDir() + " (0755)"})
	}
	nd, nw := n.Netdev, n.Net
	p.add(Step{ID: "netdev-unit", Kind: KindWriteFile, Path: nd.Path, Mode: "0644", Content: NetdevUnit(br, sn), Prev: &nd,
		Summary: fmt.Sprintf("write %s (Kind=bridge, MACAddress=%s: how uninstall recognises Barn's bridge)", nd.Path, BridgeMAC(br, sn))})
	p.add(Step{ID: "network-unit", Kind: KindWriteFile, Path: nw.Path, Mode: "0644", Content: NetworkUnit(br, sn), Prev: &nw,
		Summary: fmt.Sprintf("write %s (Address=%s, ConfigureWithoutCarrier=yes, LinkLocalAddressing=no, IPv6AcceptRA=no, RequiredForOnline=no)", nw.Path, sn.HostCIDR())})
	if !active {
		// systemd-networkd.service requires its socket (ListenNetlink=route),
		// so starting the service starts the socket too, and stopping the
		// service alone leaves a socket that restarts networkd at the next
		// netlink event. The socket is therefore a step of its own: started
		// first, stopped last by uninstall.
		//
		// networkd's runtime state files stay after it stops, and
		// networkctl then no longer says networkd is not running (found
		// live). When networkd had not run this boot (socket inactive, no
		// state file), the socket's undo, the last stop, removes the files
		// networkd wrote under that directory (Path, Prev: the state
		// file's prestate).
		if sock := n.Units[networkdSocket].Active; sock != "active" {
			st := n.State
			s := Step{ID: "networkd-socket-start", Kind: KindUnitStart, Unit: networkdSocket, Was: sock,
				Summary: fmt.Sprintf("systemctl start %s (networkd's netlink socket, which the service requires; was %s, stopped again on uninstall while still active)", networkdSocket, sock)}
			if !st.Exists {
				s.Path, s.Prev = st.Path, &st
				s.Summary = fmt.Sprintf("systemctl start %s (networkd's netlink socket, which the service requires; was %s, stopped again on uninstall while still active, and the runtime state networkd writes under %s, absent before, removed)", networkdSocket, sock, filepath.Dir(st.Path))
			}
			p.add(s)
		}
		was := n.Units[networkdService].Active
		p.add(Step{ID: "networkd-start", Kind: KindUnitStart, Unit: networkdService, Was: was,
			Summary: fmt.Sprintf("systemctl start %s (activation scan found no unit that could claim a real link; was %s, restored on uninstall while still active)", networkdService, was)})
	}
	p.add(Step{ID: "networkd-reload", Kind: KindNetworkdReload, Link: br,
		Summary: "networkctl reload (undo: networkctl delete the bridge's ifindex, once it is proven Barn's)"})
	p.add(Step{ID: "networkd-reconfigure", Kind: KindCommand, Argv: []string{"networkctl", "reconfigure", br},
		Summary: "networkctl reconfigure " + br})
	return nil
}
