package hostnet

import (
	"fmt"
	"net/netip"
	"runtime"
	"strings"

	"barn.dev/lib/exitcode"
)

// Options select what to install.
type Options struct {
	CIDR    string // "" → DefaultCIDR
	Backend string // "" or "auto" → the detected backend
}

// PlanInstall computes the install plan for the observed state (step 2 of
// the transaction). It changes nothing: it reads h's paths and names and
// o, and asks the kernel whether the readiness proof's QEMU user could
// open the TUN device (tunDenied).
// Refusals: resource (6) "subnet_in_use" when a foreign interface or route
// uses the /24; conflict (4) for a foreign bridge, an unmarked or stale
// bridge.conf block, a manifest for another network or an interrupted
// install; capability (3) for a missing or unsafe helper, a TUN device
// QEMU's user cannot open (tun_not_accessible) or a backend this
// machine cannot run; usage (2) for a bad cidr or backend name.
func (h *Host) PlanInstall(o Observed, opt Options) (Plan, error) {
	sn, err := ParseSubnet(or(opt.CIDR, DefaultCIDR))
	if err != nil {
		return Plan{}, exitcode.New(exitcode.Usage, "%v", err).WithReason("bad_cidr")
	}
	backend := opt.Backend
	if backend == "" || backend == "auto" {
		backend = o.Detected
	}
	br := h.bridge()
	p := Plan{Schema: PlanSchema, Action: "install", Backend: backend, Bridge: br, CIDR: sn.String(),
		HostAddress: sn.HostAddr().String(), Helper: h.Helper, Manifest: h.ManifestPath(),
		Verified: true, Notes: []string{}, Steps: []Step{},
		QEMUNetdev: fmt.Sprintf("bridge,id=private,br=%s,helper=%s", br, h.Helper)}
	switch backend {
	case BackendNetlink, BackendNetworkManager, BackendNetworkd:
	case BackendVmnet:
		return h.planVmnet(p, sn), nil
	default:
		return p, exitcode.New(exitcode.Usage, "--backend %q: want auto, netlink, networkmanager, networkd or vmnet", backend).WithReason("bad_backend")
	}
	if m := o.Manifest; m != nil {
		return h.planInstalled(p, o, m)
	}
	if err := checkSubnetFree(o, sn, br); err != nil {
		return p, err
	}
	if err := h.checkOwnership(o, br, sn); err != nil {
		return p, err
	}
	// the readiness proof runs QEMU with no supplementary groups (attach.go)
	if why := h.tunDenied(h.AttachUID, h.AttachGID, []uint32{}); why != "" {
		return p, exitcode.New(exitcode.Capability, "the readiness proof's QEMU would fail: %s", why).
			WithReason(FindTunDenied).WithNext(h.TunFix())
	}
	p.add(Step{ID: "write-manifest", Kind: KindManifest, Path: h.ManifestPath(), Mode: "0600",
		Summary: fmt.Sprintf("write the manifest %s (0600) with the prestate of bridge.conf, the helper and units", h.ManifestPath())})
	if err := h.planLeftovers(&p, o, sn); err != nil {
		return p, err
	}
	switch backend {
	case BackendNetlink:
		p.add(Step{ID: "bridge-add", Kind: KindBridgeAdd, Link: br, Summary: fmt.Sprintf("create bridge %s (netlink)", br)})
		p.add(Step{ID: "addr-add", Kind: KindAddrAdd, Link: br, Address: sn.HostCIDR(), Summary: fmt.Sprintf("add %s to %s", sn.HostCIDR(), br)})
		p.add(Step{ID: "link-up", Kind: KindLinkUp, Link: br, Summary: fmt.Sprintf("bring %s up", br)})
		p.Notes = append(p.Notes, NoteNetlinkReboot)
	case BackendNetworkManager:
		if err := h.planNM(&p, o, sn); err != nil {
			return p, err
		}
	case BackendNetworkd:
		if err := h.planNetworkd(&p, o, sn); err != nil {
			return p, err
		}
	}
	h.planHelperSteps(&p, o)
	p.add(Step{ID: "attach-proof", Kind: KindAttachProof, Link: br, Path: h.Helper,
		Summary: fmt.Sprintf("prove readiness: an unprivileged QEMU attaches a virtio-net NIC to %s through %s; roll everything back if it does not", br, h.Helper)})
	if backend == BackendNetworkd {
		switch u := o.Networkd.Units[networkdService]; u.Enabled {
		case "enabled":
		case "disabled":
			p.add(Step{ID: "networkd-enable", Kind: KindUnitEnable, Unit: networkdService, Was: u.Enabled,
				Summary: fmt.Sprintf("persist after the attach proof: systemctl enable %s (was %s, restored on uninstall while still enabled)", networkdService, u.Enabled)})
		default:
			p.Notes = append(p.Notes, fmt.Sprintf("%s is %s, so Barn leaves its enablement alone (systemctl disable could not restore that): the bridge comes back after a reboot only if networkd starts", networkdService, u.Enabled))
		}
	}
	return p, nil
}

// NoteNetlinkReboot is the netlink plan's note on reboots. barn-net install
// does not repair a missing bridge (it refuses with installed_drifted), so
// the note names the two commands that do bring it back.
const NoteNetlinkReboot = "netlink bridges do not survive a reboot; after one, run barn-net uninstall --yes, then barn-net install"

// planHelperSteps adds the bridge.conf block and the helper's setuid bit.
func (h *Host) planHelperSteps(p *Plan, o Observed) {
	br := h.bridge()
	if !o.QemuDir.Exists {
		p.add(Step{ID: "qemu-dir", Kind: KindMkdir, Path: h.QemuConfDir(), Mode: "0755", Summary: "create " + h.QemuConfDir() + " (0755)"})
	}
	if o.QemuDir.Exists && o.QemuDir.Dir {
		if m, _ := parseMode(o.QemuDir.Mode); m&0o001 == 0 {
			qd := o.QemuDir
			p.add(Step{ID: "qemu-dir-mode", Kind: KindChmod, Path: h.QemuConfDir(), Mode: fmt.Sprintf("%04o", m|0o005), Prev: &qd,
				Summary: fmt.Sprintf("chmod %04o %s (was %s): the helper reads the ACL after dropping to the caller's uid", m|0o005, h.QemuConfDir(), qd.Mode)})
		}
	}
	prev := o.BridgeConf
	mode := "0644"
	if prev.Exists {
		m, _ := parseMode(prev.Mode)
		mode = fmt.Sprintf("%04o", m|0o044)
		if mode != prev.Mode {
			p.Notes = append(p.Notes, fmt.Sprintf("%s becomes mode %s (was %s): qemu-bridge-helper reads it without root's file access; the mode is restored on uninstall", h.BridgeConf(), mode, prev.Mode))
		}
	}
	p.add(Step{ID: "bridge-conf", Kind: KindWriteFile, Path: h.BridgeConf(), Mode: mode, Content: WithBlock(prev.Content, br, h.ManifestPath()), Prev: &prev,
		Summary: fmt.Sprintf("append the block %q / %s / allow %s / %q to %s", BlockBegin(br), manifestLine(h.ManifestPath()), br, BlockEnd(br), h.BridgeConf())})
	m, _ := parseMode(o.Helper.Mode)
	if m&0o4000 == 0 {
		hp := o.Helper
		p.add(Step{ID: "helper-setuid", Kind: KindChmod, Path: h.Helper, Mode: fmt.Sprintf("%04o", m|0o4000), Prev: &hp,
			Summary: fmt.Sprintf("chmod %04o %s (setuid root; was %s, restored on uninstall)", m|0o4000, h.Helper, o.Helper.Mode)})
		p.Notes = append(p.Notes, "the setuid helper lets every local user attach a tap to the bridges bridge.conf allows")
	}
}

// planInstalled handles a host that already has a manifest.
func (h *Host) planInstalled(p Plan, o Observed, m *Manifest) (Plan, error) {
	if m.Status != StatusInstalled {
		return p, exitcode.New(exitcode.Conflict, "an earlier install stopped at step %d of %d (manifest %s); remove it before installing again", m.Applied, len(m.Steps), h.ManifestPath()).
			WithReason("install_interrupted").WithNext("barn-net uninstall --yes")
	}
	if m.CIDR != p.CIDR || m.Bridge != p.Bridge || m.Backend != p.Backend {
		return p, exitcode.New(exitcode.Conflict, "the host network is installed as %s %s on %s; switching needs an uninstall first", m.Backend, m.CIDR, m.Bridge).
			WithReason("installed_differently").WithNext("barn-net uninstall --yes")
	}
	var problems []string
	add := func(code, sev, fix, format string, args ...any) {
		if sev == SevError || code == FindHelperNotSetuid {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	checkBridge(o.Links, p.Bridge, mustSubnet(p.CIDR), add)
	if !ParseACL(o.BridgeConf.Content, p.Bridge).BlockIntact {
		problems = append(problems, h.BridgeConf()+" no longer holds Barn's block")
	}
	if md, _ := parseMode(o.Helper.Mode); md&0o4000 == 0 {
		problems = append(problems, h.Helper+" lost its setuid bit (mode "+o.Helper.Mode+")")
	}
	if len(problems) > 0 {
		return p, exitcode.New(exitcode.Conflict, "the installed network has drifted: %s", strings.Join(problems, "; ")).
			WithReason("installed_drifted").WithNext("barn-net uninstall --yes")
	}
	p.Noop = true
	return p, nil
}

func mustSubnet(s string) Subnet { sn, _ := ParseSubnet(s); return sn }

// checkSubnetFree refuses a /24 already used by another interface or route.
func checkSubnetFree(o Observed, sn Subnet, bridge string) error {
	for _, l := range o.Links {
		if l.Name == bridge {
			continue
		}
		for _, a := range l.Addrs {
			if pf, err := netip.ParsePrefix(a); err == nil && pf.Masked().Overlaps(sn.Prefix) {
				return inUse(sn, l.Name, fmt.Sprintf("%s has %s", l.Name, a), o)
			}
		}
	}
	for _, r := range o.Routes {
		if r.Dev == bridge {
			continue
		}
		if pf, err := netip.ParsePrefix(r.Dst); err == nil && pf.Overlaps(sn.Prefix) {
			return inUse(sn, r.Dev, fmt.Sprintf("route %s dev %s", r.Dst, r.Dev), o)
		}
	}
	return nil
}

func inUse(sn Subnet, iface, why string, o Observed) error {
	e := exitcode.New(exitcode.Resource, "%s is already in use by %s (%s); Barn never adopts a foreign interface", sn, iface, why).
		WithReason("subnet_in_use")
	if alt, ok := Propose(o.InUse()); ok {
		e = e.WithNext("barn-net plan --cidr " + alt).WithDetail(map[string]string{"iface": iface, "proposed_cidr": alt})
	} else {
		e = e.WithDetail(map[string]string{"iface": iface})
	}
	return e
}

// checkOwnership refuses to take over anything Barn did not create. A
// bridge with Barn's mark is Barn's leftover (planLeftovers removes it).
func (h *Host) checkOwnership(o Observed, br string, sn Subnet) error {
	for _, l := range o.Links {
		if l.Name == br && !isLeftoverLink(l, br, sn) {
			return exitcode.New(exitcode.Conflict, "%s already exists (%s link, MAC %s, not Barn's mark %s) and no Barn manifest records it; refusing to adopt it", br, l.Kind, l.MAC, BridgeMAC(br, sn)).
				WithReason("bridge_foreign").WithNext("ip link show " + br)
		}
	}
	if o.BridgeConf.Symlink || o.BridgeConf.Dir {
		return exitcode.New(exitcode.Conflict, "%s is not a regular file; refusing to manage it", h.BridgeConf()).WithReason("bridge_conf_foreign")
	}
	acl := ParseACL(o.BridgeConf.Content, br)
	if acl.HasBlock {
		return exitcode.New(exitcode.Conflict, "%s holds a Barn block for %s but no manifest exists; remove the block by hand after checking it", h.BridgeConf(), br).
			WithReason("bridge_conf_stale_block")
	}
	if acl.UnmarkedAllow {
		return exitcode.New(exitcode.Conflict, "%s already has an unmarked \"allow %s\"; refusing to take it over", h.BridgeConf(), br).
			WithReason("bridge_conf_foreign")
	}
	if acl.Problem != "" {
		return exitcode.New(exitcode.Conflict, "%s %s: qemu-bridge-helper refuses the whole file, so Barn's allow line would not help; fix that line first", h.BridgeConf(), acl.Problem).
			WithReason(FindBridgeConfInvalid).WithNext("sudoedit " + h.BridgeConf())
	}
	hs := o.Helper
	switch {
	case !hs.Exists:
		return exitcode.New(exitcode.Capability, "qemu-bridge-helper not found at %s", h.Helper).
			WithReason(FindHelperMissing).WithNext("apt-get install qemu-system-common")
	case hs.Symlink || hs.Dir || hs.UID != 0:
		return exitcode.New(exitcode.Capability, "qemu-bridge-helper %s must be a regular root-owned file", h.Helper).
			WithReason(FindHelperUnsafe).WithNext("apt-get install --reinstall qemu-system-common")
	}
	if o.Statoverride != "" {
		if m, _ := parseMode(hs.Mode); m&0o4000 == 0 {
			return exitcode.New(exitcode.Conflict, "dpkg-statoverride already manages %s (%q) without setuid; Barn does not override a foreign statoverride", h.Helper, o.Statoverride).
				WithReason("helper_statoverride_foreign")
		}
	}
	return nil
}

// runtimeOS is the GOOS, a variable so tests can plan vmnet as on darwin.
var runtimeOS = runtime.GOOS
