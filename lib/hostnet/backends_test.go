package hostnet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/golden"
	"barn.dev/lib/lazyre"
	"barn.dev/lib/safefile/safefiletest"
	"barn.dev/lib/testexec"
	"barn.dev/lib/wire"
	"barn.dev/lib/wire/wiretest"
)

// realPaths is a Host with the production paths, for golden plans (pure:
// nothing is read from these paths).
func realPaths() *Host {
	return &Host{EtcDir: "/etc", StateDir: "/var/lib/barn", RunDir: "/run", Helper: HelperPaths[0], Bridge: "barn0"}
}

// UUIDs of NetworkManager connections in the tests: the wired one every
// host has and a foreign bridge connection of Barn's name (Barn's own is
// the random one Apply records).
const (
	wiredUUID   = "5f0c3a4e-1111-4a4a-9b9b-0123456789ab"
	foreignUUID = "0a1b2c3d-3333-4e4e-8f8f-001122334455"
)

var uuidRE = lazyre.New(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func baseObserved() Observed {
	return Observed{
		Detected: BackendNetlink,
		Links: []LinkInfo{{Name: "eth0", Kind: "device", Up: true, Addrs: []string{"192.168.1.20/24"}},
			{Name: "lo", Kind: "device", Up: true, Addrs: []string{"127.0.0.1/8"}}},
		Routes:     []RouteInfo{{Dst: "192.168.1.0/24", Dev: "eth0"}},
		BridgeConf: FileState{Path: "/etc/qemu/bridge.conf"},
		QemuDir:    FileState{Path: "/etc/qemu"},
		Helper:     FileState{Path: HelperPaths[0], Exists: true, Mode: "0755"},
		NM:         NMState{Connections: []NMConn{}},
		Networkd: NetworkdState{Units: map[string]UnitState{}, Claims: []string{},
			Dir: FileState{Path: "/etc/systemd/network", Exists: true, Dir: true, Mode: "0755"}, Netdev: FileState{Path: "/etc/systemd/network/80-barn0.netdev"},
			Net: FileState{Path: "/etc/systemd/network/80-barn0.network"}},
	}
}

func networkdUnits(active, enabled string) map[string]UnitState {
	m := map[string]UnitState{}
	for _, u := range NetworkdUnits {
		m[u] = UnitState{Active: active, Enabled: enabled}
	}
	return m
}

// goldenStates are representative host states, one golden plan each.
func goldenStates() map[string]func() (Observed, Options) {
	return map[string]func() (Observed, Options){
		"netlink-fresh": func() (Observed, Options) { return baseObserved(), Options{} },
		"netlink-existing-acl": func() (Observed, Options) {
			o := baseObserved()
			o.QemuDir = FileState{Path: "/etc/qemu", Exists: true, Dir: true, Mode: "0750"}
			o.BridgeConf = FileState{Path: "/etc/qemu/bridge.conf", Exists: true, Mode: "0640", SHA256: digest([]byte("allow br7\n")), Content: "allow br7\n"}
			o.Helper.Mode = "4755"
			return o, Options{CIDR: "192.168.210.0/24"}
		},
		"networkmanager": func() (Observed, Options) {
			o := baseObserved()
			o.Detected, o.NM = BackendNetworkManager, NMState{Running: true, Connections: []NMConn{{Name: "Wired connection 1", UUID: wiredUUID, Type: "802-3-ethernet"}}}
			return o, Options{}
		},
		"networkmanager-firewalld": func() (Observed, Options) {
			o := baseObserved()
			o.Detected, o.NM = BackendNetworkManager, NMState{Running: true, Firewalld: true, Connections: []NMConn{{Name: "Wired connection 1", UUID: wiredUUID, Type: "802-3-ethernet"}}}
			return o, Options{}
		},
		"networkd-active": func() (Observed, Options) {
			o := baseObserved()
			o.Detected, o.Networkd.Booted, o.Networkd.Units = BackendNetworkd, true, networkdUnits("active", "enabled")
			return o, Options{}
		},
		"networkd-inactive-safe": func() (Observed, Options) {
			o := baseObserved()
			o.Networkd.Booted, o.Networkd.Units = true, networkdUnits("inactive", "disabled")
			o.Networkd.Dir = FileState{Path: "/etc/systemd/network"}
			return o, Options{Backend: BackendNetworkd}
		},
		"vmnet": func() (Observed, Options) { return baseObserved(), Options{Backend: BackendVmnet} },
	}
}

func TestGoldenPlans(t *testing.T) {
	for name, state := range goldenStates() {
		t.Run(name, func(t *testing.T) {
			o, opt := state()
			p, err := realPaths().PlanInstall(o, opt)
			if err != nil {
				t.Fatal(err)
			}
			got, err := wire.MarshalIndent(p)
			if err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			must(t, p.RenderText(&text))
			got = append(append(got, "\n---\n"...), text.String()...)
			golden.Check(t, filepath.Join("testdata", "plans", name+".golden"), got)
		})
	}
}

func TestPlanRefusals(t *testing.T) {
	h := realPaths()
	cases := []struct {
		name   string
		mutate func(*Observed, *Options)
		class  exitcode.Class
		reason string
	}{
		{"address on another link", func(o *Observed, _ *Options) {
			o.Links = append(o.Links, LinkInfo{Name: "wg0", Kind: "wireguard", Addrs: []string{"10.10.10.77/24"}})
		}, exitcode.Resource, "subnet_in_use"},
		{"route via another link", func(o *Observed, _ *Options) {
			o.Routes = append(o.Routes, RouteInfo{Dst: "10.0.0.0/8", Dev: "tun0"})
		}, exitcode.Resource, "subnet_in_use"},
		{"foreign bridge", func(o *Observed, _ *Options) { o.Links = append(o.Links, LinkInfo{Name: "barn0", Kind: "bridge"}) }, exitcode.Conflict, "bridge_foreign"},
		{"unmarked allow", func(o *Observed, _ *Options) {
			o.BridgeConf = FileState{Path: "/etc/qemu/bridge.conf", Exists: true, Mode: "0644", Content: "allow barn0\n"}
		}, exitcode.Conflict, "bridge_conf_foreign"},
		{"a line the helper refuses", func(o *Observed, _ *Options) {
			o.BridgeConf = FileState{Path: "/etc/qemu/bridge.conf", Exists: true, Mode: "0644", Content: "allow br7 # the old lab\n"}
		}, exitcode.Conflict, FindBridgeConfInvalid},
		{"stale block", func(o *Observed, _ *Options) {
			o.BridgeConf = FileState{Path: "/etc/qemu/bridge.conf", Exists: true, Mode: "0644", Content: ManagedBlock("barn0", "/var/lib/barn/network.json")}
		}, exitcode.Conflict, "bridge_conf_stale_block"},
		{"helper missing", func(o *Observed, _ *Options) { o.Helper = FileState{Path: HelperPaths[0]} }, exitcode.Capability, FindHelperMissing},
		{"helper not root", func(o *Observed, _ *Options) { o.Helper.UID = 1000 }, exitcode.Capability, FindHelperUnsafe},
		{"foreign statoverride", func(o *Observed, _ *Options) { o.Statoverride = "root kvm 0750 " + HelperPaths[0] }, exitcode.Conflict, "helper_statoverride_foreign"},
		{"bad cidr", func(_ *Observed, opt *Options) { opt.CIDR = "10.10.10.1/24" }, exitcode.Usage, "bad_cidr"},
		{"public cidr", func(_ *Observed, opt *Options) { opt.CIDR = "8.8.8.0/24" }, exitcode.Usage, "bad_cidr"},
		{"interrupted", func(o *Observed, _ *Options) {
			o.Manifest = &Manifest{Status: StatusInstalling, Steps: []Step{{}}, Applied: 1}
		}, exitcode.Conflict, "install_interrupted"},
		{"installed for another cidr", func(o *Observed, _ *Options) {
			o.Manifest = &Manifest{Status: StatusInstalled, Backend: BackendNetlink, Bridge: "barn0", CIDR: "10.10.20.0/24"}
		}, exitcode.Conflict, "installed_differently"},
		{"nm connection exists", func(o *Observed, opt *Options) {
			o.NM = NMState{Running: true, Connections: []NMConn{{Name: "barn0", UUID: foreignUUID, Type: "bridge"}}}
			opt.Backend = BackendNetworkManager
		}, exitcode.Conflict, "bridge_foreign"},
		{"nm not running", func(_ *Observed, opt *Options) { opt.Backend = BackendNetworkManager }, exitcode.Capability, "backend_unavailable"},
		{"networkd without systemd", func(_ *Observed, opt *Options) { opt.Backend = BackendNetworkd }, exitcode.Capability, "backend_unavailable"},
		{"networkd activation unsafe", func(o *Observed, opt *Options) {
			o.Networkd.Booted, o.Networkd.Units = true, networkdUnits("inactive", "disabled")
			o.Networkd.Claims = []string{"/etc/systemd/network/10-eth.network: [Match] Name=e* matches existing link eth0"}
			opt.Backend = BackendNetworkd
		}, exitcode.Conflict, "networkd_activation_unsafe"},
		{"networkd foreign unit", func(o *Observed, opt *Options) {
			o.Networkd.Booted, o.Networkd.Units = true, networkdUnits("active", "enabled")
			o.Networkd.Netdev.Exists = true
			opt.Backend = BackendNetworkd
		}, exitcode.Conflict, "unit_foreign"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o, opt := baseObserved(), Options{}
			c.mutate(&o, &opt)
			_, err := h.PlanInstall(o, opt)
			xe := exitcode.As(err)
			if xe == nil || xe.Class != c.class || xe.Reason != c.reason {
				t.Fatalf("want %s/%s, got %#v", c.class, c.reason, xe)
			}
		})
	}
}

func TestActivationScan(t *testing.T) {
	root := t.TempDir()
	h := &Host{EtcDir: filepath.Join(root, "etc"), RunDir: filepath.Join(root, "run"), Bridge: "barn0"}
	links := []LinkInfo{{Name: "lo"}, {Name: "enp1s0"}}
	write := func(rel, content string) {
		p := filepath.Join(root, rel)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(content), 0o644))
	}
	if c := h.activationScan(links); len(c) != 0 {
		t.Fatalf("empty dirs: %v", c)
	}
	write("usr/lib/systemd/network/80-container-ve.network", "[Match]\nName=ve-*\nDriver=veth\n")
	write("usr/lib/systemd/network/80-wifi-adhoc.network", "[Match]\nType=wlan\n")
	write("etc/systemd/network/80-barn0.netdev", "[NetDev]\nName=barn0\nKind=bridge\n")
	if c := h.activationScan(links); len(c) != 0 {
		t.Fatalf("vendor units that match no link and Barn's own unit must not count: %v", c)
	}
	write("usr/lib/systemd/network/99-en.network", "[Match]\nName=en*\n")
	write("etc/systemd/network/20-all.network", "[Network]\nDHCP=yes\n")
	write("run/systemd/network/30-typed.network", "[Match]\nType=ether\n")
	write("etc/systemd/network/40-vlan.netdev", "[NetDev]\nName=vlan9\nKind=vlan\n")
	got := strings.Join(h.activationScan(links), "\n")
	for _, want := range []string{"99-en.network: [Match] Name=en* matches existing link enp1s0", "20-all.network: empty [Match] matches every link",
		"30-typed.network: unsupported [Match] keys Type", "40-vlan.netdev: a .netdev creates a link"} {
		if !strings.Contains(got, want) {
			t.Errorf("scan lacks %q:\n%s", want, got)
		}
	}
}

func TestProposeAndSubnet(t *testing.T) {
	o := baseObserved()
	if c, ok := Propose(o.InUse()); !ok || c != "10.10.10.0/24" {
		t.Fatalf("free host: %s %v", c, ok)
	}
	o.Links = append(o.Links, LinkInfo{Name: "wg0", Addrs: []string{"10.10.0.1/16"}})
	if c, ok := Propose(o.InUse()); !ok || c != "172.30.10.0/24" {
		t.Fatalf("10.10/16 taken: %s %v", c, ok)
	}
	o.Routes = append(o.Routes, RouteInfo{Dst: "172.16.0.0/12", Dev: "vpn0"}, RouteInfo{Dst: "192.168.0.0/16", Dev: "vpn0"})
	if c, ok := Propose(o.InUse()); ok {
		t.Fatalf("everything taken, got %s", c)
	}
	sn, err := ParseSubnet("10.10.10.0/24")
	if err != nil || sn.HostCIDR() != "10.10.10.1/24" || sn.DHCPEnd().String() != "10.10.10.8" {
		t.Fatalf("%v %v", sn, err)
	}
	for _, bad := range []string{"10.10.10.0/23", "10.10.10.5/24", "1.2.3.0/24", "fd00::/64", "x"} {
		if _, err := ParseSubnet(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestACL(t *testing.T) {
	const m = "/var/lib/barn/barn 0\n/network.json" // quoted in the block: one line
	cases := []struct {
		content            string
		allows, has, intct bool
		unmarked           bool
	}{
		{"", false, false, false, false},
		{"allow barn0\n", true, false, false, true},
		{"allow all\n", true, false, false, false},
		{"allow barn0\ndeny barn0\n", false, false, false, true},
		{"deny all\n" + ManagedBlock("barn0", m), false, true, true, false},
		{"allow br7\n" + ManagedBlock("barn0", m), true, true, true, false},
		{"# BEGIN BARN MANAGED: barn0\n# manifest: \"/s/network.json\"\nallow barn0\nallow all\n# END BARN MANAGED: barn0\n", true, true, false, false},
		{"# BEGIN BARN MANAGED: barn0\nallow barn0\n# END BARN MANAGED: barn0\n", true, true, false, false}, // no manifest named
	}
	for i, c := range cases {
		a := ParseACL(c.content, "barn0")
		if a.Allows("barn0") != c.allows || a.HasBlock != c.has || a.BlockIntact != c.intct || a.UnmarkedAllow != c.unmarked {
			t.Errorf("case %d %q: %+v allows=%v", i, c.content, a, a.Allows("barn0"))
		}
	}
	if WithBlock("allow br7", "barn0", m) != "allow br7\n"+ManagedBlock("barn0", m) {
		t.Fatal("WithBlock must add the missing newline")
	}
	if a := ParseACL(ManagedBlock("barn0", m), "barn0"); a.Manifest != m {
		t.Fatalf("manifest read back %q, want %q", a.Manifest, m)
	}
	two := "allow br7\n" + ManagedBlock("barn0", "/a/network.json") + "# BEGIN BARN MANAGED: barn2\nallow all\n# END BARN MANAGED: barn2\n" + ManagedBlock("barn1", m)
	if got := Blocks(two); !slices.Equal(got, []Block{{"barn0", "/a/network.json"}, {"barn1", m}}) {
		t.Fatalf("Blocks: %+v (barn2's block is not intact)", got)
	}
}

// --- recording fakes of nmcli, systemctl and networkctl -------------------

type fakeHost struct {
	*Host
	root, log string
}

// fakeLinks is a LinkOps without a kernel: NM and networkd never call the
// mutating methods (they go through nmcli/networkctl). While the file
// bridgeIf exists (the fake networkctl writes it on reload, as networkd
// would create the .netdev's bridge), Links lists bridge too.
type fakeLinks struct {
	links    []LinkInfo
	bridgeIf string
	bridge   LinkInfo
}

func (f fakeLinks) Links() ([]LinkInfo, error) {
	if _, err := os.Stat(f.bridgeIf); f.bridgeIf != "" && err == nil {
		return append(slices.Clone(f.links), f.bridge), nil
	}
	return f.links, nil
}
func (f fakeLinks) Routes() ([]RouteInfo, error) {
	return []RouteInfo{{Dst: "192.168.1.0/24", Dev: "eth0"}}, nil
}
func (fakeLinks) AddBridge(string, string, string) error {
	return errors.New("netlink used by a non-netlink backend")
}

// DelLinkIndex deletes only the bridge NetworkManager left (see
// deleteNMConnection); any other use is a non-netlink backend's error.
func (f fakeLinks) DelLinkIndex(i int) error {
	if _, err := os.Stat(f.bridgeIf); f.bridgeIf != "" && err == nil && i == f.bridge.Index {
		return os.Remove(f.bridgeIf)
	}
	return errors.New("netlink used by a non-netlink backend")
}
func (fakeLinks) AddAddr(string, string) error {
	return errors.New("netlink used by a non-netlink backend")
}
func (fakeLinks) DelAddr(string, string) error {
	return errors.New("netlink used by a non-netlink backend")
}
func (fakeLinks) SetUp(string) error { return errors.New("netlink used by a non-netlink backend") }

// newFakeHost writes shell fakes into <root>/bin that append their argv to
// <root>/log and answer the read-only queries from <root>/fake/*.
// writeExecutable writes an executable fake (testexec: no "text file
// busy" when the parallel tests fork meanwhile).
func writeExecutable(t *testing.T, path, content string) {
	t.Helper()
	must(t, testexec.WriteScript(path, []byte(content)))
}

func newFakeHost(t *testing.T, nm bool, networkdActive string) *fakeHost {
	root := t.TempDir()
	log := filepath.Join(root, "log")
	for _, d := range []string{"bin", "etc/systemd", "state", "run/systemd/system", "run/systemd/netif/links", "fake"} {
		must(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	helper := filepath.Join(root, "qemu-bridge-helper")
	writeExecutable(t, helper, "#!/bin/sh\n")
	state := func(name, v string) { must(t, os.WriteFile(filepath.Join(root, "fake", name), []byte(v), 0o644)) }
	if nm {
		state("nm", "running")
	} else {
		state("nm", "asleep")
	}
	// As systemd 252: the service requires its socket, so starting the
	// service starts the socket, stopping the socket stops the service,
	// and stopping the service leaves the socket active.
	state("networkd", networkdActive)
	state("networkd-socket", networkdActive)
	state("networkd-enabled", "disabled")
	script := func(name, body string) {
		writeExecutable(t, filepath.Join(root, "bin", name), "#!/bin/sh\necho \""+name+" $*\" >> "+log+"\nF="+root+"/fake\n"+body)
	}
	state("nm-connections", wiredUUID+":802-3-ethernet:Wired connection 1\n")
	state("nm-active", "")
	state("firewalld", "inactive")
	// As NetworkManager 1.42 with firewalld 1.3: up makes the bridge and
	// binds it to the connection's zone in firewalld's runtime; down (which
	// waits for the teardown) removes both; delete of a still active
	// connection leaves both (the live host-under-test guests showed the
	// link and the trusted binding left). nm-link-lingers and nm-fw-sticks:
	// even down leaves the link, or the binding.
	script("nmcli", `case "$*" in
"-t -f RUNNING general") cat $F/nm; echo ;;
"-t -f UUID,TYPE,NAME connection show") cat $F/nm-connections ;;
"-t -f UUID connection show --active") cat $F/nm-active ;;
# Every active connection is on barn0; nm-external: NetworkManager's own
# connection for a barn0 configured outside it.
"-t -f DEVICE,STATE,CON-UUID device") echo "eth0:unmanaged:"
  if [ -e $F/nm-external ]; then echo "barn0:connected (externally):5e3c2a10-0000-4000-8000-00000000e47e"
  elif [ -s $F/nm-active ]; then echo "barn0:connected:$(head -n 1 $F/nm-active)"
  elif [ -e $F/bridge ]; then echo "barn0:unmanaged:"; fi ;;
"-g bridge.mac-address connection show uuid "*) sed 's/:/\\:/g' $F/nm-mac-$6; echo ;;
"-g connection.zone connection show uuid "*) cat $F/nm-zone-$6; echo ;;
"connection add type bridge con-name "*) u=$(echo "$*" | sed -n 's/.* connection\.uuid \([^ ]*\).*/\1/p')
  # nm-add-lost: the add does not take effect (within the wait).
  [ -e $F/nm-add-lost ] || {
    echo "$u:bridge:$6" >> $F/nm-connections
    echo "$*" | sed -n 's/.* bridge\.mac-address \([^ ]*\).*/\1/p' | tr -d '\n' > $F/nm-mac-$u
    echo "$*" | sed -n 's/.* connection\.zone \([^ ]*\).*/\1/p' | tr -d '\n' > $F/nm-zone-$u
  }
  # As the real nmcli on a loaded host: libnm's D-Bus call gives up while
  # NetworkManager still adds the connection (nm-add-lost: it does not).
  [ -e $F/nm-add-timeout ] && { echo "Error: Failed to add '$6' connection: Timeout was reached" >&2; exit 4; }
  echo "Connection '$6' ($u) successfully added." ;;
"connection up uuid "*) echo "$4" >> $F/nm-active; touch $F/bridge
  [ "$(cat $F/firewalld)" = active ] && [ -s $F/nm-zone-$4 ] && cp $F/nm-zone-$4 $F/fw-runtime-barn0 ;;
"connection down uuid "*) grep -v "^$4\$" $F/nm-active > $F/nm-a; mv $F/nm-a $F/nm-active
  [ -e $F/nm-link-lingers ] || rm -f $F/bridge
  [ -e $F/nm-fw-sticks ] || rm -f $F/fw-runtime-barn0 ;;
"connection delete uuid "*) grep -v "^$4:" $F/nm-connections > $F/nm-c; mv $F/nm-c $F/nm-connections
  grep -v "^$4\$" $F/nm-active > $F/nm-a; mv $F/nm-a $F/nm-active
  rm -f $F/nm-mac-$4 $F/nm-zone-$4
  # nm-delete-timeout: libnm gives up while NetworkManager deletes it.
  [ -e $F/nm-delete-timeout ] && { echo "Error: Timeout was reached" >&2; exit 4; } ;;
esac
exit 0
`)
	script("systemctl", `# Several units (is-active u1 u2 ...): one state line each, in order,
# and the exit status of the last one not in the state asked about.
case "$1" in is-active|is-enabled) if [ $# -gt 2 ]; then
  v=$1; shift; rc=0; for u; do "$0" "$v" "$u" || rc=$?; done; exit $rc
fi ;; esac
case "$1 $2" in
"is-active systemd-networkd.service") cat $F/networkd; echo; [ "$(cat $F/networkd)" = active ] ;;
"is-active systemd-networkd.socket") cat $F/networkd-socket; echo; [ "$(cat $F/networkd-socket)" = active ] ;;
"is-active firewalld") cat $F/firewalld; echo; [ "$(cat $F/firewalld)" = active ] ;;
"is-active "*) echo inactive; exit 3 ;;
"is-enabled systemd-networkd.service") cat $F/networkd-enabled; echo; [ "$(cat $F/networkd-enabled)" = enabled ] ;;
"is-enabled "*) echo static; exit 0 ;;
"start systemd-networkd.service") echo -n active > $F/networkd; echo -n active > $F/networkd-socket
  touch $F/../run/systemd/netif/state $F/../run/systemd/netif/links/2 ;; # kept after stop, as with systemd
"stop systemd-networkd.service") echo -n inactive > $F/networkd ;;
"start systemd-networkd.socket") echo -n active > $F/networkd-socket ;;
"stop systemd-networkd.socket") echo -n inactive > $F/networkd-socket; echo -n inactive > $F/networkd ;;
"enable systemd-networkd.service") echo -n enabled > $F/networkd-enabled ;;
"disable systemd-networkd.service") echo -n disabled > $F/networkd-enabled ;;
esac
[ -e $F/fail-$1 ] && { echo "fake failure of systemctl $1" >&2; exit 1; }
exit 0
`)
	script("networkctl", `case "$1" in
reload) touch $F/bridge ;;
delete) rm -f $F/bridge ;;
esac
exit 0
`)
	h := &Host{EtcDir: filepath.Join(root, "etc"), StateDir: filepath.Join(root, "state"), RunDir: filepath.Join(root, "run"),
		Helper: helper, Bridge: "barn0", UID: 0, Runner: ExecRunner{Path: filepath.Join(root, "bin")},
		Link: fakeLinks{links: []LinkInfo{{Name: "eth0", Kind: "device", Up: true, Addrs: []string{"192.168.1.20/24"}}},
			bridgeIf: filepath.Join(root, "fake", "bridge"),
			bridge:   LinkInfo{Name: "barn0", Index: 7, Kind: "bridge", MAC: BridgeMAC("barn0", mustSubnet(DefaultCIDR)), Up: true, Addrs: []string{"10.10.10.1/24"}}},
		Firewalld: fakeFirewalld{dir: filepath.Join(root, "fake"), log: log},
		Prover:    func(ctx context.Context, h *Host, p *Plan) error { return nil }}
	if os.Geteuid() != 0 {
		t.Skip("the helper must be root-owned for install; run as root")
	}
	return &fakeHost{Host: h, root: root, log: log}
}

// fakeFirewalld answers from and changes the fake host's files, as
// firewalld 1.3 does on D-Bus: fake/firewalld ("active" or not) says
// whether it is on the bus, fake/fw-runtime-<iface> and
// fake/fw-permanent-<iface> hold the zone binding iface (absent: none);
// fake/fw-remove-fails makes removeInterface fail. Changes are logged.
type fakeFirewalld struct{ dir, log string }

func (f fakeFirewalld) running() bool {
	b, _ := os.ReadFile(filepath.Join(f.dir, "firewalld"))
	return string(b) == "active"
}

func (f fakeFirewalld) ZoneOfInterface(_ context.Context, iface string, permanent bool) (string, bool, error) {
	if !f.running() {
		return "", false, nil
	}
	name := "fw-runtime-" + iface
	if permanent {
		name = "fw-permanent-" + iface
	}
	b, err := os.ReadFile(filepath.Join(f.dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return "", true, nil
	}
	return strings.TrimSpace(string(b)), true, err
}

func (f fakeFirewalld) change(op, zone, iface string, apply func(path string) error) error {
	l, err := os.OpenFile(f.log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(l, "firewalld %s %s %s\n", op, zone, iface)
	l.Close()
	if !f.running() {
		return errors.New("firewalld: not running")
	}
	return apply(filepath.Join(f.dir, "fw-runtime-"+iface))
}

func (f fakeFirewalld) RemoveInterface(_ context.Context, zone, iface string) error {
	return f.change("removeInterface", zone, iface, func(path string) error {
		if _, err := os.Stat(filepath.Join(f.dir, "fw-remove-fails")); err == nil {
			return errors.New("org.fedoraproject.FirewallD1.Exception: COMMAND_FAILED")
		}
		if b, _ := os.ReadFile(path); string(b) != zone {
			return errors.New("org.fedoraproject.FirewallD1.Exception: UNKNOWN_INTERFACE: '" + iface + "' is not in '" + zone + "'")
		}
		return os.Remove(path)
	})
}

func (f fakeFirewalld) ChangeZoneOfInterface(_ context.Context, zone, iface string) error {
	return f.change("changeZoneOfInterface", zone, iface, func(path string) error {
		return os.WriteFile(path, []byte(zone), 0o644)
	})
}

// mutations returns the logged commands that change something (queries
// such as is-active, is-enabled and nmcli -t are left out).
func (f *fakeHost) mutations(t *testing.T) []string {
	b, err := os.ReadFile(f.log)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" || strings.Contains(l, " is-active ") || strings.Contains(l, " is-enabled ") || strings.HasPrefix(l, "nmcli -t ") ||
			strings.HasPrefix(l, "nmcli -g ") {
			continue
		}
		out = append(out, l)
	}
	must(t, os.Remove(f.log))
	return out
}

func (f *fakeHost) install(t *testing.T, opt Options) (Plan, error) {
	ctx := context.Background()
	o, err := f.Inspect(ctx)
	must(t, err)
	p, err := f.PlanInstall(o, opt)
	if err != nil {
		return p, err
	}
	_, err = f.Apply(ctx, p, opt, nil)
	return p, err
}

func wantLog(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s: commands\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestNetworkManagerAgainstFakes(t *testing.T) {
	f := newFakeHost(t, true, "inactive")
	p, err := f.install(t, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Backend != BackendNetworkManager {
		t.Fatalf("detected %s", p.Backend)
	}
	m, _ := f.ReadManifest()
	if m == nil || m.Created.NMConnection == nil || !uuidRE.MatchString(m.Created.NMConnection.UUID) {
		t.Fatalf("the manifest must record the UUID Barn chose: %+v", m)
	}
	barnUUID := m.Created.NMConnection.UUID
	wantLog(t, "install", f.mutations(t),
		"nmcli connection add type bridge con-name barn0 ifname barn0 ipv4.method manual ipv4.addresses 10.10.10.1/24 ipv6.method disabled bridge.stp no bridge.mac-address "+BridgeMAC("barn0", mustSubnet(DefaultCIDR))+" connection.autoconnect yes connection.uuid "+barnUUID,
		"nmcli connection up uuid "+barnUUID)
	conf, _ := os.ReadFile(f.BridgeConf())
	if string(conf) != ManagedBlock("barn0", f.ManifestPath()) {
		t.Fatalf("bridge.conf %q", conf)
	}
	fl := f.Link.(fakeLinks)
	f.Link = fakeLinks{links: []LinkInfo{{Name: "barn0", Kind: "bridge", Up: true, MAC: fl.bridge.MAC, Addrs: []string{"10.10.10.1/24"}},
		{Name: "vnet0", Kind: "tuntap", Master: "barn0", Addrs: []string{}}}}
	if _, err := f.Uninstall(context.Background(), nil); exitcode.ClassOf(err) != exitcode.Conflict {
		t.Fatalf("uninstall with a tap attached: %v", err)
	}
	f.Link = fl
	if _, err := f.Uninstall(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	wantLog(t, "uninstall", f.mutations(t), "nmcli connection down uuid "+barnUUID, "nmcli connection delete uuid "+barnUUID)
	if _, err := os.Stat(f.BridgeConf()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("bridge.conf should be gone: %v", err)
	}
	if st, _ := StatFile(f.Helper, false); st.Mode != "0755" {
		t.Fatalf("helper mode %s", st.Mode)
	}
	if m, _ := f.ReadManifest(); m != nil {
		t.Fatal("manifest left behind")
	}
}

// TestNetworkManagerForeignConnectionKept: Barn's connection was deleted
// and someone added their own "barn0" (another UUID). Uninstall deletes no
// connection (the old code ran nmcli connection delete barn0, which hits
// every connection of that name), says it kept it, and still removes
// everything else Barn wrote.
// TestNetworkManagerAddTimeoutTookEffect: nmcli connection add failed
// with "Timeout was reached" (exit 4) although NetworkManager added the
// connection, as the live host-under-test suite saw on a loaded machine.
// Install finds the recorded UUID listed and carries on.
func TestNetworkManagerAddTimeoutTookEffect(t *testing.T) {
	f := newFakeHost(t, true, "inactive")
	must(t, os.WriteFile(filepath.Join(f.root, "fake", "nm-add-timeout"), nil, 0o644))
	if _, err := f.install(t, Options{}); err != nil {
		t.Fatalf("install after an add that timed out but took effect: %v", err)
	}
	m, err := f.ReadManifest()
	must(t, err)
	conns, _ := os.ReadFile(filepath.Join(f.root, "fake", "nm-connections"))
	if m.Created.NMConnection == nil || !strings.Contains(string(conns), m.Created.NMConnection.UUID+":bridge:barn0") {
		t.Fatalf("the manifest does not record the connection NetworkManager lists:\n%s", conns)
	}
}

// TestNetworkManagerAddTimeoutLost: the add timed out and NetworkManager
// never listed the connection within nmAddWait: install fails naming the
// timeout, rolls back, and leaves no manifest.
func TestNetworkManagerAddTimeoutLost(t *testing.T) {
	f := newFakeHost(t, true, "inactive")
	for _, n := range []string{"nm-add-timeout", "nm-add-lost"} {
		must(t, os.WriteFile(filepath.Join(f.root, "fake", n), nil, 0o644))
	}
	defer func(w time.Duration) { nmAddWait = w }(nmAddWait)
	nmAddWait = 0
	_, err := f.install(t, Options{})
	if err == nil || !strings.Contains(err.Error(), "Timeout was reached") || !strings.Contains(err.Error(), "rolled back") {
		t.Fatalf("install: want the nmcli timeout and a rollback, got %v", err)
	}
	if m, _ := f.ReadManifest(); m != nil {
		t.Fatalf("a manifest is left after the rollback: %+v", m)
	}
}

// TestNetworkManagerUninstallDeletesTheLeftBridge: as the real
// NetworkManager 1.42 did, the bridge of Barn's connection outlives its
// teardown, and NetworkManager refuses nmcli device delete for it.
// Uninstall deletes that link by its index (it carries Barn's MAC) and
// succeeds.
func TestNetworkManagerUninstallDeletesTheLeftBridge(t *testing.T) {
	f := newFakeHost(t, true, "inactive")
	if _, err := f.install(t, Options{}); err != nil {
		t.Fatal(err)
	}
	f.mutations(t)
	m, err := f.ReadManifest()
	must(t, err)
	barnUUID := m.Created.NMConnection.UUID
	must(t, os.WriteFile(filepath.Join(f.root, "fake", "nm-link-lingers"), nil, 0o644))
	if _, err := f.Uninstall(context.Background(), nil); err != nil {
		t.Fatalf("uninstall with the bridge left by NetworkManager: %v", err)
	}
	wantLog(t, "uninstall", f.mutations(t), "nmcli connection down uuid "+barnUUID, "nmcli connection delete uuid "+barnUUID)
	if _, err := os.Stat(filepath.Join(f.root, "fake", "bridge")); err == nil {
		t.Fatal("the bridge NetworkManager left is still there after uninstall")
	}
}

func TestNetworkManagerForeignConnectionKept(t *testing.T) {
	f := newFakeHost(t, true, "inactive")
	if _, err := f.install(t, Options{}); err != nil {
		t.Fatal(err)
	}
	f.mutations(t)
	conns := filepath.Join(f.root, "fake", "nm-connections")
	must(t, os.WriteFile(conns, []byte(wiredUUID+":802-3-ethernet:Wired connection 1\n"+foreignUUID+":bridge:barn0\n"), 0o644))
	p, err := f.Uninstall(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantLog(t, "uninstall", f.mutations(t))
	if !notesContain(p, "kept: ", "next: nmcli connection show barn0") {
		t.Fatalf("notes must name the kept connection and the next step: %q", p.Notes)
	}
	if b, _ := os.ReadFile(conns); !strings.Contains(string(b), foreignUUID) {
		t.Fatalf("the foreign connection is gone: %q", b)
	}
	if _, err := os.Stat(f.BridgeConf()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("bridge.conf should be gone: %v", err)
	}
	if m, _ := f.ReadManifest(); m != nil {
		t.Fatal("manifest left behind")
	}
	// Barn's own connection, seen listed after install and deleted behind
	// its back, leaves the ledger (live on the NetworkManager host under
	// test it stayed, and kept the state directory Barn had created).
	if b, err := os.ReadFile(f.LedgerPath()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the ledger is left: %s (%v)", b, err)
	}
}

// notesContain reports whether one note of p contains all of subs.
func notesContain(p Plan, subs ...string) bool {
	for _, n := range p.Notes {
		all := true
		for _, s := range subs {
			all = all && strings.Contains(n, s)
		}
		if all {
			return true
		}
	}
	return false
}

func TestNetworkdAgainstFakes(t *testing.T) {
	f := newFakeHost(t, false, "inactive")
	p, err := f.install(t, Options{Backend: BackendNetworkd})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range p.Steps {
		ids = append(ids, s.ID)
	}
	if strings.Join(ids, ",") != "write-manifest,networkd-dir,netdev-unit,network-unit,networkd-socket-start,networkd-start,networkd-reload,networkd-reconfigure,qemu-dir,bridge-conf,helper-setuid,attach-proof,networkd-enable" {
		t.Fatalf("steps %v", ids)
	}
	wantLog(t, "install", f.mutations(t), "systemctl start systemd-networkd.socket", "systemctl start systemd-networkd.service", "networkctl reload", "networkctl reconfigure barn0", "systemctl enable systemd-networkd.service")
	nw, _ := os.ReadFile(f.networkdFile(".network"))
	if !strings.Contains(string(nw), "Address=10.10.10.1/24\nConfigureWithoutCarrier=yes") {
		t.Fatalf(".network %q", nw)
	}
	m, _ := f.ReadManifest()
	if m.Prestate.Units["systemd-networkd.service"] != (UnitState{Active: "inactive", Enabled: "disabled"}) {
		t.Fatalf("prestate units %v", m.Prestate.Units)
	}
	if id := m.Created.Bridge; id == nil || id.Index != 7 || id.MAC != BridgeMAC("barn0", mustSubnet(DefaultCIDR)) {
		t.Fatalf("the manifest must pin the bridge networkd made (MAC and ifindex): %+v", id)
	}
	if _, err := f.Uninstall(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	wantLog(t, "uninstall (reverse order)", f.mutations(t), "systemctl disable systemd-networkd.service", "networkctl delete 7", "systemctl stop systemd-networkd.service", "systemctl stop systemd-networkd.socket")
	// Stopping the service alone would leave its socket active, and the
	// socket restarts networkd at the next netlink event (found live).
	if b, _ := os.ReadFile(filepath.Join(f.root, "fake", "networkd-socket")); string(b) != "inactive" {
		t.Fatalf("systemd-networkd.socket is %q after uninstall, want inactive as before install", b)
	}
	// networkd's runtime state stays after it stops; networkd had not run
	// before install, so its files go too (found live), the directories
	// (tmpfiles.d's) stay.
	for _, p := range []string{f.networkdFile(".netdev"), f.NetworkdDir(), f.QemuConfDir(), f.networkdStateFile(), filepath.Join(filepath.Dir(f.networkdStateFile()), "links", "2")} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s should be gone: %v", p, err)
		}
	}
}

// TestNetworkdForeignBridgeKept: after install the .netdev's bridge was
// replaced by someone else's barn0 (another MAC, another ifindex), and the
// service failed under its admin. Uninstall deletes no link (the old undo
// was networkctl delete barn0), leaves the service alone, keeps and names
// both, stops only the socket still as Barn left it, and removes Barn's
// files.
func TestNetworkdForeignBridgeKept(t *testing.T) {
	f := newFakeHost(t, false, "inactive")
	if _, err := f.install(t, Options{Backend: BackendNetworkd}); err != nil {
		t.Fatal(err)
	}
	f.mutations(t)
	fl := f.Link.(fakeLinks)
	fl.bridge.MAC, fl.bridge.Index = "52:54:00:12:34:56", 9
	f.Link = fl
	must(t, os.WriteFile(filepath.Join(f.root, "fake", "networkd"), []byte("failed"), 0o644))
	p, err := f.Uninstall(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantLog(t, "uninstall", f.mutations(t), "systemctl disable systemd-networkd.service", "systemctl stop systemd-networkd.socket")
	if !notesContain(p, "kept: barn0 is not the bridge Barn created", "MAC 52:54:00:12:34:56", "ifindex 9, recorded 7", "next: ip -d link show barn0") {
		t.Fatalf("notes must name the kept bridge, what differs and the next step: %q", p.Notes)
	}
	if !notesContain(p, "kept: systemd-networkd.service is failed", "next: systemctl status systemd-networkd.service") {
		t.Fatalf("notes must name the unit left alone: %q", p.Notes)
	}
	if _, err := os.Stat(filepath.Join(f.root, "fake", "bridge")); err != nil {
		t.Fatalf("the foreign bridge is gone: %v", err)
	}
	for _, p := range []string{f.networkdFile(".netdev"), f.networkdFile(".network"), f.BridgeConf()} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s should be gone: %v", p, err)
		}
	}
}

func TestNetworkdRollbackAgainstFakes(t *testing.T) {
	f := newFakeHost(t, false, "active")
	// networkd already active: no start step; the readiness proof fails.
	f.Prover = func(ctx context.Context, h *Host, p *Plan) error { return fmt.Errorf("access denied by acl file") }
	_, err := f.install(t, Options{})
	if exitcode.ClassOf(err) != exitcode.Capability || !strings.Contains(err.Error(), "rolled back") {
		t.Fatalf("want a rolled-back capability error, got %v", err)
	}
	wantLog(t, "install then rollback", f.mutations(t), "networkctl reload", "networkctl reconfigure barn0", "networkctl delete 7")
	if m, _ := f.ReadManifest(); m != nil {
		t.Fatal("manifest left after rollback")
	}
	// A failing undo keeps the manifest and says so.
	f.Prover = nil
	f.FailAfter = "networkd-enable"
	must(t, os.WriteFile(filepath.Join(f.root, "fake", "fail-disable"), nil, 0o644))
	f.Prover = func(ctx context.Context, h *Host, p *Plan) error { return nil }
	must(t, os.WriteFile(filepath.Join(f.root, "fake", "networkd"), []byte("inactive"), 0o644))
	_, err = f.install(t, Options{Backend: BackendNetworkd})
	if xe := exitcode.As(err); xe == nil || xe.Reason != "rollback_failed" || !strings.Contains(xe.Message, "automatic rollback failed") {
		t.Fatalf("want rollback_failed, got %v", err)
	}
	m, _ := f.ReadManifest()
	if m == nil || m.Status != StatusInstalling || m.Steps[m.Applied-1].ID != "networkd-enable" {
		t.Fatalf("manifest after a failed rollback: %+v", m)
	}
	// The next install refuses and points at uninstall.
	if _, err := f.install(t, Options{Backend: BackendNetworkd}); exitcode.As(err).Reason != "install_interrupted" {
		t.Fatalf("install after an interrupted one: %v", err)
	}
}

// TestReadManifestRefusals: a manifest with the wrong mode says how to fix
// it; one owned by another user is never trusted (uninstall would chmod and
// remove the paths it lists as root).
func TestReadManifestRefusals(t *testing.T) {
	root := t.TempDir()
	h := &Host{StateDir: root, Bridge: "barn0"}
	path := h.ManifestPath()
	m := Manifest{Schema: ManifestSchema, Steps: []Step{}}
	data, err := wire.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = h.ReadManifest()
	if e := exitcode.As(err); e == nil || e.Class != exitcode.Integrity || e.Next != "chmod 0600 "+path {
		t.Fatalf("mode 0644: err = %#v, want integrity with next chmod 0600 %s", e, path)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := h.ReadManifest(); err != nil || got == nil {
		t.Fatalf("valid manifest: %v, %v", got, err)
	}
	if os.Geteuid() != 0 {
		t.Log("not root: the foreign-owner case needs chown")
		return
	}
	if err := os.Chown(path, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	_, err = h.ReadManifest()
	if e := exitcode.As(err); e == nil || e.Class != exitcode.Integrity || !strings.Contains(e.Message, "owned by uid 4242") {
		t.Fatalf("foreign owner: err = %v, want integrity naming uid 4242", err)
	}
}

// TestReadManifestRefusesDuplicateAndCaseVariantNames: the root-owned
// manifest that decides what uninstall removes is read strictly.
func TestReadManifestRefusesDuplicateAndCaseVariantNames(t *testing.T) {
	h := &Host{StateDir: t.TempDir(), Bridge: "barn0"}
	data, err := wire.Marshal(Manifest{Schema: ManifestSchema, Steps: []Step{}})
	if err != nil {
		t.Fatal(err)
	}
	variants, err := wiretest.Variants(data)
	if err != nil {
		t.Fatal(err)
	}
	for kind, bad := range variants {
		if err := os.WriteFile(h.ManifestPath(), bad, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := h.ReadManifest(); exitcode.ClassOf(err) != exitcode.Integrity {
			t.Errorf("%s name: %v, want integrity", kind, err)
		}
	}
}

// TestReadManifestNeverReadsThroughASwappedSymlink: the manifest is checked
// on the descriptor it is read from, so a manifest swapped for a symlink
// to another file between the check and the read is never trusted.
func TestReadManifestNeverReadsThroughASwappedSymlink(t *testing.T) {
	dir := t.TempDir()
	h := &Host{StateDir: dir, Bridge: "barn0"}
	good, err := wire.Marshal(Manifest{Schema: ManifestSchema, Steps: []Step{}, Bridge: "barn0"})
	if err != nil {
		t.Fatal(err)
	}
	forged, err := wire.Marshal(Manifest{Schema: ManifestSchema, Steps: []Step{}, Bridge: "forged"})
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "elsewhere.json")
	if err := os.WriteFile(target, forged, 0o644); err != nil {
		t.Fatal(err)
	}
	safefiletest.SwapRace(t, h.ManifestPath(), good, 0o600, target, 3*time.Second,
		func() (string, error) {
			m, err := h.ReadManifest()
			if err != nil || m == nil {
				return "", err
			}
			return m.Bridge, nil
		},
		func(bridge string) bool { return bridge == "forged" })
}

// TestActivationScanFailsClosed: a unit directory that cannot be read and
// a Name= pattern that cannot be evaluated are claims (activation stays
// refused), not silence.
func TestActivationScanFailsClosed(t *testing.T) {
	root := t.TempDir()
	h := &Host{EtcDir: filepath.Join(root, "etc"), RunDir: filepath.Join(root, "run"), Bridge: "barn0"}
	must(t, os.MkdirAll(filepath.Join(root, "etc", "systemd"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "etc", "systemd", "network"), []byte("not a directory"), 0o644))
	must(t, os.MkdirAll(filepath.Join(root, "run", "systemd", "network"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "run", "systemd", "network", "10-bad.network"), []byte("[Match]\nName=[en\n"), 0o644))
	got := strings.Join(h.activationScan([]LinkInfo{{Name: "enp1s0"}}), "\n")
	for _, want := range []string{"etc/systemd/network: unreadable", "10-bad.network: [Match] Name=[en is not a pattern"} {
		if !strings.Contains(got, want) {
			t.Errorf("scan lacks %q:\n%s", want, got)
		}
	}
}

type runnerFunc func(argv []string) ([]byte, error)

func (f runnerFunc) Run(_ context.Context, argv []string) ([]byte, error) { return f(argv) }

// TestInspectNMFailsWhenSystemctlCannotAnswer: with NetworkManager running,
// a systemctl that prints no state (no bus, not installed) is an
// inspection error, never "firewalld is inactive".
func TestInspectNMFailsWhenSystemctlCannotAnswer(t *testing.T) {
	h := &Host{Bridge: "barn0", Runner: runnerFunc(func(argv []string) ([]byte, error) {
		switch strings.Join(argv, " ") {
		case "nmcli -t -f RUNNING general":
			return []byte("running\n"), nil
		case "nmcli -t -f NAME connection show":
			return []byte("Wired connection 1\n"), nil
		case "systemctl is-active firewalld":
			return nil, errors.New("Failed to connect to bus: No such file or directory")
		}
		return nil, fmt.Errorf("unexpected %v", argv)
	})}
	if s, err := h.inspectNM(context.Background()); err == nil {
		t.Fatalf("inspectNM = %+v, nil; want an error", s)
	}
	h.Runner = runnerFunc(func(argv []string) ([]byte, error) {
		if argv[0] == "systemctl" {
			return []byte("inactive\n"), errors.New("exit status 3")
		}
		if len(argv) > 3 && argv[3] == "general" {
			return []byte("running\n"), nil
		}
		return []byte("Wired connection 1\n"), nil
	})
	if s, err := h.inspectNM(context.Background()); err != nil || s.Firewalld {
		t.Fatalf("inactive firewalld: %+v, %v", s, err)
	}
}

// TestManifestVersions: barn-net reads the manifest schema it writes and
// refuses every other schema, and a manifest from a development build
// (an undo command that acts by name, "nmcli connection delete barn0") is
// refused as integrity naming the file and the way out; nothing of it is
// planned or run.
func TestManifestVersions(t *testing.T) {
	h := &Host{StateDir: t.TempDir(), Bridge: "barn0"}
	write := func(m Manifest) {
		t.Helper()
		data, err := wire.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(h.ManifestPath(), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	current := Manifest{Schema: ManifestSchema, Status: StatusInstalled, Backend: BackendNetworkManager, Bridge: "barn0", CIDR: DefaultCIDR,
		Steps: []Step{{ID: "write-manifest", Kind: KindManifest, Path: h.ManifestPath()},
			{ID: "vmnet-bootstrap", Kind: KindCommand, Argv: []string{"launchctl", "bootstrap"}, UndoArgv: []string{"launchctl", "bootout", "system/" + VmnetLabel}}},
		Applied: 2}
	write(current)
	if m, err := h.ReadManifest(); err != nil || m == nil || len(m.Steps) != 2 {
		t.Fatalf("current manifest: %+v, %v", m, err)
	}
	for _, schema := range []string{"barn.net.manifest/v0", "barn.net.manifest/v2", ""} {
		old := current
		old.Schema = schema
		write(old)
		if _, err := h.ReadManifest(); exitcode.ClassOf(err) != exitcode.Integrity || !strings.Contains(err.Error(), h.ManifestPath()) {
			t.Errorf("schema %q: %v, want integrity naming the manifest", schema, err)
		}
	}
	dev := current
	dev.Steps = append(append([]Step{}, current.Steps...),
		Step{ID: "nm-connection-add", Kind: KindCommand, Argv: []string{"nmcli", "connection", "add"}, UndoArgv: []string{"nmcli", "connection", "delete", "barn0"}})
	dev.Applied = 3
	write(dev)
	_, err := h.ReadManifest()
	e := exitcode.As(err)
	if e == nil || e.Class != exitcode.Integrity || e.Reason != "dev_build_format" || !strings.Contains(e.Message, h.ManifestPath()) ||
		!strings.Contains(e.Message, "nmcli connection delete barn0") || !strings.Contains(e.Next, "sudo rm "+h.ManifestPath()) {
		t.Fatalf("development build's manifest: %#v, want integrity dev_build_format naming the file and the undo", e)
	}
}

// TestBothActiveChoosesNetworkManager documents the decision for a host
// where NetworkManager and systemd-networkd are both active: auto picks
// NetworkManager, the service such a host is configured with (networkd
// then typically has no units of its own and manages nothing); networkd
// stays available with --backend networkd.
func TestBothActiveChoosesNetworkManager(t *testing.T) {
	f := newFakeHost(t, true, "active")
	o, err := f.Inspect(context.Background())
	must(t, err)
	if o.Detected != BackendNetworkManager {
		t.Fatalf("both active: detected %s, want %s", o.Detected, BackendNetworkManager)
	}
	p, err := f.PlanInstall(o, Options{Backend: BackendNetworkd})
	if err != nil || p.Backend != BackendNetworkd {
		t.Fatalf("--backend networkd on a host where both are active: %v %v", p.Backend, err)
	}
}

// Without udev the TUN device stays root's 0600, and the unprivileged
// QEMU of the readiness proof could not open it: install refuses before
// it changes anything, naming the mode and the one command that helps.
// Preflight, which judges the user who will run QEMU, names the same.
func TestTunDeviceQEMUCannotOpen(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("judging another user's access to the TUN device runs a child as that user: root only")
	}
	tun := filepath.Join(t.TempDir(), "tun")
	if err := os.WriteFile(tun, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Dir(tun), filepath.Dir(filepath.Dir(tun))} {
		if err := os.Chmod(d, 0o755); err != nil { // the test's own directories: searchable by nobody
			t.Fatal(err)
		}
	}
	h := realPaths()
	h.Tun, h.AttachUID, h.AttachGID = tun, 65534, 65534
	_, err := h.PlanInstall(baseObserved(), Options{})
	xe := exitcode.As(err)
	if xe == nil || xe.Class != exitcode.Capability || xe.Reason != FindTunDenied || xe.Next != "chmod 0666 "+tun ||
		!strings.Contains(xe.Message, "(mode 0600, owner 0:0)") || !strings.Contains(xe.Message, "uid 65534 cannot open") {
		t.Fatalf("install with a 0600 tun: %#v", xe)
	}
	var got []Finding
	h.UID = 65534
	h.checkTun(func(code, sev, fix, format string, args ...any) {
		got = append(got, Finding{Code: code, Severity: sev, Fix: fix, Message: fmt.Sprintf(format, args...)})
	})
	if len(got) != 1 || got[0].Code != FindTunDenied || got[0].Severity != SevError || got[0].Fix != "chmod 0666 "+tun {
		t.Fatalf("preflight findings %+v", got)
	}
	if err := os.Chmod(tun, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := h.PlanInstall(baseObserved(), Options{}); err != nil {
		t.Fatalf("install with a 0666 tun: %v", err)
	}
	got = nil
	h.checkTun(func(code, sev, fix, format string, args ...any) { got = append(got, Finding{Code: code}) })
	if len(got) != 0 {
		t.Fatalf("preflight findings with a 0666 tun: %+v", got)
	}
}

// TestApplyInspectedInspectsOnce: install --yes passes the inspection it
// planned from (taken under the host lock) to ApplyInspected and
// UninstallInspected, which do not inspect again; Apply and Uninstall,
// for a plan the user was asked about, do. Counted by NetworkManager's
// "is it running" question, which every inspection asks once.
func TestApplyInspectedInspectsOnce(t *testing.T) {
	f := newFakeHost(t, true, "inactive")
	ctx := context.Background()
	inspections := func() int {
		b, err := os.ReadFile(f.log)
		must(t, err)
		must(t, os.Remove(f.log))
		return strings.Count(string(b), "nmcli -t -f RUNNING general")
	}
	o, err := f.Inspect(ctx)
	must(t, err)
	p, err := f.PlanInstall(o, Options{})
	must(t, err)
	_, err = f.ApplyInspected(ctx, o, p, Options{}, nil)
	must(t, err)
	if n := inspections(); n != 1 {
		t.Errorf("inspect + ApplyInspected: %d inspections, want 1", n)
	}
	o, err = f.Inspect(ctx)
	must(t, err)
	_, err = f.UninstallInspected(ctx, o, nil)
	must(t, err)
	if n := inspections(); n != 1 {
		t.Errorf("inspect + UninstallInspected: %d inspections, want 1", n)
	}
	if _, err := f.install(t, Options{}); err != nil {
		t.Fatal(err)
	}
	_, err = f.Uninstall(ctx, nil)
	must(t, err)
	if n := inspections(); n != 3 {
		t.Errorf("inspect + Apply (2), then Uninstall (1): %d inspections, want 3", n)
	}
}

// TestUnitStatesOneRun: the networkd units' states come from one
// systemctl run per verb; an answer that is not one state word per unit
// (a unit systemctl cannot look up prints an error and ends, the error
// possibly before the states) is asked unit by unit, and a unit with no
// state at all is an inspection error (review of the batching: helper-77).
func TestUnitStatesOneRun(t *testing.T) {
	var runs []string
	h := &Host{Runner: runnerFunc(func(argv []string) ([]byte, error) {
		runs = append(runs, strings.Join(argv, " "))
		switch strings.Join(argv, " ") {
		case "systemctl is-enabled a b c":
			return []byte("enabled\nFailed to get unit file state for b: No such file or directory\n"), errors.New("exit status 1")
		case "systemctl is-enabled b":
			return []byte("not-found\n"), errors.New("exit status 1")
		case "systemctl is-enabled c":
			return []byte("static\n"), nil
		case "systemctl is-enabled a":
			return []byte("enabled\n"), nil
		case "systemctl is-active a b c":
			return []byte("active\ninactive\nfailed\n"), errors.New("exit status 3")
		case "systemctl is-enabled b c a":
			// systemd 252: the error (unbuffered) before the states.
			return []byte("Failed to get unit file state for a: No such file or directory\nnot-found\nstatic\n"), errors.New("exit status 1")
		}
		return nil, errors.New("Failed to connect to bus")
	})}
	ctx := context.Background()
	got, err := h.unitStates(ctx, "is-active", "a", "b", "c")
	if err != nil || strings.Join(got, " ") != "active inactive failed" || len(runs) != 1 {
		t.Errorf("is-active: %q, %v after %q", got, err, runs)
	}
	runs = nil
	got, err = h.unitStates(ctx, "is-enabled", "a", "b", "c")
	if err != nil || strings.Join(got, " ") != "enabled not-found static" || len(runs) != 4 {
		t.Errorf("is-enabled with a unit not found: %q, %v after %q", got, err, runs)
	}
	runs = nil
	got, err = h.unitStates(ctx, "is-enabled", "b", "c", "a")
	if err != nil || strings.Join(got, " ") != "not-found static enabled" || len(runs) != 4 {
		t.Errorf("is-enabled with the last unit not found, its error first: %q, %v after %q", got, err, runs)
	}
	if got, err := h.unitStates(ctx, "is-enabled", "x", "y"); err == nil {
		t.Errorf("no systemctl answering: %q, nil; want an error", got)
	}
}

// TestApplyRefusesAMacOSPlanFirst: a plan of macOS's backend, shown on
// Linux for review, is refused as capability before the host is
// inspected (nothing here could inspect it: no Link, no Runner).
func TestApplyRefusesAMacOSPlanFirst(t *testing.T) {
	defer func(os string) { runtimeOS = os }(runtimeOS)
	runtimeOS = "linux"
	_, err := (&Host{}).Apply(context.Background(), Plan{Backend: BackendVmnet, Steps: []Step{{ID: "x"}}}, Options{}, nil)
	if e := exitcode.As(err); e == nil || e.Class != exitcode.Capability || e.Reason != "backend_unavailable" {
		t.Fatalf("Apply of a vmnet plan on Linux: %v; want capability backend_unavailable", err)
	}
}
