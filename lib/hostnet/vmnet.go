package hostnet

import (
	"fmt"
	"strings"
)

// The socket_vmnet release the vmnet plan (macOS) installs. Barn pins no
// archive digest for it: no Barn developer has downloaded and verified the
// release archive (this project's machines have no internet), and a digest
// nobody checked would be a check that cannot fail. The plan therefore
// installs the socket_vmnet the user built from the tagged source (the
// project's documented `make` build), and says so.
const (
	VmnetRelease = "v1.2.1"
	VmnetPrefix  = "/opt/barn/libexec"
	VmnetLabel   = "io.pgsty.barn.vmnet"
	VmnetPlist   = "/Library/LaunchDaemons/io.pgsty.barn.vmnet.plist"
	VmnetSocket  = "/private/var/run/barn-vmnet.sock"
	VmnetPidfile = "/private/var/run/barn-vmnet.pid"
	VmnetLogDir  = "/var/log/barn-vmnet"
	VmnetState   = "/private/var/db/barn/network.json"
)

// VmnetDaemonArgs is the socket_vmnet command line for sn.
func VmnetDaemonArgs(sn Subnet, interfaceID string) []string {
	return []string{VmnetPrefix + "/socket_vmnet", "--vmnet-mode=host", "--vmnet-gateway=" + sn.HostAddr().String(),
		"--vmnet-dhcp-end=" + sn.DHCPEnd().String(), "--vmnet-mask=255.255.255.0",
		"--vmnet-interface-id=" + interfaceID, "--socket-group=staff", "--pidfile=" + VmnetPidfile, VmnetSocket}
}

// VmnetPlistContent is the LaunchDaemon (root:wheel, RunAtLoad, KeepAlive).
func VmnetPlistContent(args []string) string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
  <key>Label</key><string>` + VmnetLabel + `</string>
  <key>ProgramArguments</key>
  <array>
`)
	for _, a := range args {
		fmt.Fprintf(&b, "    <string>%s</string>\n", a)
	}
	b.WriteString(`  </array>
  <key>RunAtLoad</key><true/>
  <key>KeepAlive</key><true/>
  <key>UserName</key><string>root</string>
  <key>StandardOutPath</key><string>` + VmnetLogDir + `/stdout.log</string>
  <key>StandardErrorPath</key><string>` + VmnetLogDir + `/stderr.log</string>
</dict>
</plist>
`)
	return b.String()
}

// VmnetInterfaceID is the fixed vmnet interface UUID Barn derives for a
// subnet, so re-installs get the same host interface.
func VmnetInterfaceID(sn Subnet) string {
	d := digest([]byte("barn-vmnet:" + sn.String()))
	return strings.ToUpper(d[0:8] + "-" + d[8:12] + "-4" + d[13:16] + "-8" + d[17:20] + "-" + d[20:32])
}

// planVmnet returns the macOS socket_vmnet plan. It is never executed on
// Linux: Verified is false and install refuses it there.
func (h *Host) planVmnet(p Plan, sn Subnet) Plan {
	id := VmnetInterfaceID(sn)
	args := VmnetDaemonArgs(sn, id)
	p.Verified = false
	p.Helper = VmnetPrefix + "/socket_vmnet_client"
	p.Manifest = VmnetState
	p.Bridge = "vmnet (" + id + ")"
	p.QEMUNetdev = "stream,id=private,server=off,addr.type=unix,addr.path=" + VmnetSocket + ",reconnect=5"
	p.Notes = append(p.Notes, "UNVERIFIED: socket_vmnet runs on macOS only; this plan is golden-tested, never applied here",
		"QEMU before 7.2's stream netdev uses `socket_vmnet_client "+VmnetSocket+" qemu-system-… -netdev socket,id=private,fd=3`")
	p.add(Step{ID: "write-manifest", Kind: KindManifest, Path: VmnetState, Mode: "0600", Summary: "write the state " + VmnetState + " (root, 0600) with the prestate"})
	p.add(Step{ID: "vmnet-binaries", Kind: KindCommand,
		Argv:     []string{"install", "-o", "root", "-g", "wheel", "-m", "0755", "socket_vmnet", "socket_vmnet_client", VmnetPrefix + "/"},
		UndoArgv: []string{"rm", "-f", VmnetPrefix + "/socket_vmnet", VmnetPrefix + "/socket_vmnet_client"},
		Summary: "install socket_vmnet and socket_vmnet_client, built by you from the socket_vmnet " + VmnetRelease +
			" source tag (Barn pins no archive digest), into " + VmnetPrefix + " (root:wheel 0755)"})
	p.add(Step{ID: "vmnet-logdir", Kind: KindMkdir, Path: VmnetLogDir, Mode: "0755", Summary: "create " + VmnetLogDir + " (root:wheel 0755)"})
	p.add(Step{ID: "vmnet-plist", Kind: KindWriteFile, Path: VmnetPlist, Mode: "0644", Content: VmnetPlistContent(args),
		Prev: &FileState{Path: VmnetPlist}, Summary: "write the LaunchDaemon " + VmnetPlist + " (label " + VmnetLabel + ")"})
	p.add(Step{ID: "vmnet-bootstrap", Kind: KindCommand, Argv: []string{"launchctl", "bootstrap", "system", VmnetPlist},
		UndoArgv: []string{"launchctl", "bootout", "system/" + VmnetLabel}, Summary: "launchctl bootstrap system " + VmnetPlist})
	p.add(Step{ID: "attach-proof", Kind: KindAttachProof, Path: VmnetSocket,
		Summary: "prove readiness: an unprivileged QEMU connects its private NIC to " + VmnetSocket})
	return p
}
