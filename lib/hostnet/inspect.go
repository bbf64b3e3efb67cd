package hostnet

import (
	"context"
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"barn.dev/lib/exitcode"
)

// Observed is everything a plan is computed from (step 1 of the
// transaction: routes, interfaces, services, ownership, existing state).
type Observed struct {
	Detected     string        `json:"detected"` // backend chosen by what owns the host network
	Links        []LinkInfo    `json:"links"`
	Routes       []RouteInfo   `json:"routes"`
	BridgeConf   FileState     `json:"bridge_conf"`
	QemuDir      FileState     `json:"qemu_dir"`
	Helper       FileState     `json:"helper"`
	Manifest     *Manifest     `json:"manifest,omitempty"`
	NM           NMState       `json:"nm"`
	Networkd     NetworkdState `json:"networkd"`
	Statoverride string        `json:"statoverride,omitempty"` // dpkg-statoverride line for the helper, if any
}

// NMState is what NetworkManager reports.
type NMState struct {
	Running     bool     `json:"running"`
	Firewalld   bool     `json:"firewalld"`
	Connections []NMConn `json:"connections"`
	// BridgeZone is the zone firewalld's runtime binds the bridge's name
	// to ("" none); read only while firewalld is active.
	BridgeZone string `json:"bridge_zone,omitempty"`
	// Ledger is Barn's record of the connection UUIDs it handed to
	// NetworkManager (ledger.go), read whether or not it runs.
	Ledger Ledger `json:"ledger,omitzero"`
}

// NetworkdState is systemd-networkd's state and the activation-safety scan.
type NetworkdState struct {
	Booted bool                 `json:"booted"` // systemd is PID 1
	Units  map[string]UnitState `json:"units"`
	Dir    FileState            `json:"dir"`     // <EtcDir>/systemd/network
	Netdev FileState            `json:"netdev"`  // 80-<bridge>.netdev
	Net    FileState            `json:"network"` // 80-<bridge>.network
	// State is networkd's runtime state file <RunDir>/systemd/netif/state:
	// networkd writes it (and the per-link files beside it) once it runs,
	// and they stay after it stops; networkctl warns "systemd-networkd is
	// not running" only while it is absent.
	State FileState `json:"state"`
	// Claims lists existing unit files that could claim a real interface
	// if networkd were started (the activation-safety scan).
	Claims []string `json:"claims"`
}

// NetworkdUnits are the units whose state is recorded in the prestate.
var NetworkdUnits = []string{"systemd-networkd.service", "systemd-networkd.socket",
	"systemd-network-generator.service", "systemd-networkd-wait-online.service"}

// Inspect observes the host read-only. Errors from optional probes (nmcli,
// systemctl) mean "not in use"; netlink and file errors are returned.
func (h *Host) Inspect(ctx context.Context) (Observed, error) {
	var o Observed
	var err error
	if o.Links, err = h.Link.Links(); err != nil {
		return o, err
	}
	if o.Routes, err = h.Link.Routes(); err != nil {
		return o, err
	}
	if o.BridgeConf, err = StatFile(h.BridgeConf(), true); err != nil {
		return o, err
	}
	if o.QemuDir, err = StatFile(h.QemuConfDir(), false); err != nil {
		return o, err
	}
	if o.Helper, err = StatFile(h.Helper, false); err != nil {
		return o, err
	}
	if o.Manifest, err = h.ReadManifest(); err != nil {
		return o, err
	}
	o.Statoverride = h.statoverride()
	if o.NM, err = h.inspectNM(ctx); err != nil {
		return o, err
	}
	o.Networkd, err = h.inspectNetworkd(ctx, o.Links)
	if err != nil {
		return o, err
	}
	// What is in charge: NetworkManager when it runs, even when networkd is
	// active too (the host is configured through NetworkManager; networkd
	// beside it usually has no units of its own), then networkd, else
	// netlink (TestBothActiveChoosesNetworkManager).
	switch {
	case o.NM.Running:
		o.Detected = BackendNetworkManager
	case o.Networkd.Booted && o.Networkd.Units["systemd-networkd.service"].Active == "active":
		o.Detected = BackendNetworkd
	default:
		o.Detected = BackendNetlink
	}
	return o, nil
}

func (h *Host) run(ctx context.Context, argv ...string) (string, error) {
	out, err := h.Runner.Run(ctx, argv)
	return strings.TrimSpace(string(out)), err
}

// unitState asks systemctl (verb is-active or is-enabled) about unit. Both
// exit non-zero for a stopped or disabled unit but still print its state;
// no state at all means systemctl itself failed, which is an error rather
// than "inactive".
func (h *Host) unitState(ctx context.Context, verb, unit string) (string, error) {
	out, err := h.run(ctx, "systemctl", verb, unit)
	if state := firstLine(out); state != "" {
		return state, nil
	}
	if err == nil {
		err = errors.New("no output")
	}
	return "", exitcode.Wrap(exitcode.Runtime, err, "systemctl %s %s", verb, unit).WithReason("host_inspection_failed")
}

// unitStates is unitState for several units in one systemctl run (it
// prints one state per unit, in order; each run costs a process and a bus
// connection, seconds under TCG). An answer that is not one state word
// per unit is asked again unit by unit: systemctl stops at a unit it
// cannot look up, and its unbuffered error can come before the states it
// printed (stdout is flushed at exit), which line counts alone would
// misalign when the last unit fails.
func (h *Host) unitStates(ctx context.Context, verb string, units ...string) ([]string, error) {
	out, _ := h.run(ctx, append([]string{"systemctl", verb}, units...)...)
	if states := strings.Split(out, "\n"); len(states) == len(units) && !slices.ContainsFunc(states, notStateWord) {
		return states, nil
	}
	states := make([]string, len(units))
	for i, u := range units {
		var err error
		if states[i], err = h.unitState(ctx, verb, u); err != nil {
			return nil, err
		}
	}
	return states, nil
}

// notStateWord reports whether s is not a systemctl state word ("active",
// "enabled-runtime", "not-found": lower-case letters and dashes).
func notStateWord(s string) bool {
	return s == "" || strings.TrimLeft(s, "abcdefghijklmnopqrstuvwxyz-") != ""
}

func (h *Host) inspectNM(ctx context.Context) (NMState, error) {
	s := NMState{Connections: []NMConn{}}
	var err error
	if s.Ledger, err = h.readLedger(); err != nil {
		return s, err
	}
	out, err := h.run(ctx, "nmcli", "-t", "-f", "RUNNING", "general")
	if err != nil || out != "running" {
		return s, nil // no NetworkManager answering: not the backend in charge
	}
	s.Running = true
	if s.Connections, err = h.nmConnections(ctx); err != nil {
		return s, err
	}
	fw, err := h.unitState(ctx, "is-active", "firewalld")
	if err != nil {
		return s, err
	}
	s.Firewalld = fw == "active"
	for i, c := range s.Connections {
		if c.Name == h.bridge() && c.Type == "bridge" {
			if s.Connections[i], err = h.nmMark(ctx, c); err != nil {
				return s, err
			}
		}
	}
	if s.Firewalld {
		if s.BridgeZone, _, err = h.firewalldZone(ctx, h.bridge(), false); err != nil {
			return s, err
		}
	}
	return s, nil
}

func (h *Host) inspectNetworkd(ctx context.Context, links []LinkInfo) (NetworkdState, error) {
	s := NetworkdState{Booted: h.SystemdBooted(), Units: map[string]UnitState{}, Claims: []string{}}
	var err error
	if s.Dir, err = StatFile(h.NetworkdDir(), false); err != nil {
		return s, err
	}
	if s.Netdev, err = StatFile(h.networkdFile(".netdev"), true); err != nil {
		return s, err
	}
	if s.Net, err = StatFile(h.networkdFile(".network"), true); err != nil {
		return s, err
	}
	if s.State, err = StatFile(h.networkdStateFile(), false); err != nil {
		return s, err
	}
	if !s.Booted {
		return s, nil
	}
	active, err := h.unitStates(ctx, "is-active", NetworkdUnits...)
	if err != nil {
		return s, err
	}
	enabled, err := h.unitStates(ctx, "is-enabled", NetworkdUnits...)
	if err != nil {
		return s, err
	}
	for i, u := range NetworkdUnits {
		s.Units[u] = UnitState{Active: active[i], Enabled: enabled[i]}
	}
	s.Claims = h.activationScan(links)
	return s, nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// networkdStateFile is <RunDir>/systemd/netif/state, networkd's runtime
// state (the directory itself is made by tmpfiles.d at boot).
func (h *Host) networkdStateFile() string {
	return filepath.Join(h.RunDir, "systemd", "netif", "state")
}

func (h *Host) networkdFile(ext string) string {
	return filepath.Join(h.NetworkdDir(), "80-"+h.bridge()+ext)
}

// activationScan lists unit files that could claim a real link if
// networkd were started: any .netdev (other than Barn's), and any .network
// under /etc or /run whose [Match] is empty, uses keys other than Name=, or
// whose Name= glob matches an existing non-loopback link. Under the vendor
// directory (<EtcDir>/../usr/lib/systemd/network; "/usr/lib/systemd/network"
// on a real host) only Name= matches against existing links count.
func (h *Host) activationScan(links []LinkInfo) []string {
	root := filepath.Dir(h.EtcDir)
	dirs := []struct {
		path   string
		vendor bool
	}{{h.NetworkdDir(), false}, {filepath.Join(h.RunDir, "systemd", "network"), false},
		{filepath.Join(root, "usr", "lib", "systemd", "network"), true}}
	claims := []string{}
	for _, d := range dirs {
		entries, err := os.ReadDir(d.path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			// Unknowable is not harmless: the scan fails closed.
			claims = append(claims, d.path+": unreadable: "+err.Error())
			continue
		}
		for _, e := range entries {
			p := filepath.Join(d.path, e.Name())
			if p == h.networkdFile(".netdev") || p == h.networkdFile(".network") {
				continue
			}
			switch filepath.Ext(e.Name()) {
			case ".netdev":
				if !d.vendor {
					claims = append(claims, p+": a .netdev creates a link when networkd starts")
				}
			case ".network":
				b, err := os.ReadFile(p)
				if err != nil {
					claims = append(claims, p+": unreadable")
					continue
				}
				if why := networkClaims(string(b), links, d.vendor); why != "" {
					claims = append(claims, p+": "+why)
				}
			}
		}
	}
	sort.Strings(claims)
	return claims
}

func networkClaims(content string, links []LinkInfo, vendor bool) string {
	section, names, other := "", []string{}, []string{}
	for _, raw := range strings.Split(content, "\n") {
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		if strings.HasPrefix(line, "[") {
			section = line
			continue
		}
		if section != "[Match]" {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if k == "Name" {
			names = append(names, strings.Fields(v)...)
		} else {
			other = append(other, k)
		}
	}
	for _, pat := range names {
		for _, l := range links {
			if l.Name == "lo" {
				continue
			}
			ok, err := filepath.Match(pat, l.Name)
			if err != nil {
				return "[Match] Name=" + pat + " is not a pattern Barn can evaluate; it could match a real link"
			}
			if ok {
				return "[Match] Name=" + pat + " matches existing link " + l.Name
			}
		}
	}
	if vendor {
		return ""
	}
	if len(names) == 0 && len(other) == 0 {
		return "empty [Match] matches every link"
	}
	if len(other) > 0 {
		return "unsupported [Match] keys " + strings.Join(other, ",") + " could match a real link"
	}
	return ""
}

// statoverride returns the dpkg-statoverride line for the helper, or "".
func (h *Host) statoverride() string {
	b, err := os.ReadFile(filepath.Join(filepath.Dir(h.EtcDir), "var", "lib", "dpkg", "statoverride"))
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 4 && f[3] == h.Helper {
			return l
		}
	}
	return ""
}

// InUse returns every prefix used by host interfaces and routes, for Propose.
func (o Observed) InUse() []netip.Prefix {
	var out []netip.Prefix
	for _, l := range o.Links {
		for _, a := range l.Addrs {
			if p, err := netip.ParsePrefix(a); err == nil {
				out = append(out, p.Masked())
			}
		}
	}
	for _, r := range o.Routes {
		if p, err := netip.ParsePrefix(r.Dst); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

// Attached lists links enslaved to bridge (taps of running VMs), sorted.
func (o Observed) Attached(bridge string) []string {
	out := []string{}
	for _, l := range o.Links {
		if l.Master == bridge {
			out = append(out, l.Name)
		}
	}
	return out
}
