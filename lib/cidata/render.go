package cidata

import (
	"bytes"
	"embed"
	"fmt"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"barn.dev/lib/quote"
	"barn.dev/lib/spec"
)

//go:embed scripts/*
var scriptFS embed.FS

// scriptNames are the guest helpers installed under LibexecDir, in the
// order they appear in user-data.
var scriptNames = []string{
	"barn-status",
	"barn-identity-contract",
	"barn-hosts",
	"barn-init-disks",
	"barn-init-shares",
	"barn-install-control-ssh",
	"barn-private-contract",
	"barn-finalize",
}

// Script returns the content of the named guest helper.
func Script(name string) ([]byte, error) { return scriptFS.ReadFile("scripts/" + name) }

// q is a string always emitted double-quoted, so YAML 1.1 readers
// (cloud-init's PyYAML) never resolve a MAC such as 52:54:00:12:34:56 as a
// sexagesimal integer.
type q string

func (s q) MarshalYAML() (any, error) { return quote.YAMLNode(string(s), ""), nil }

func marshal(header string, v any) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(header)
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode seed yaml: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

type metaData struct {
	InstanceID    q `yaml:"instance-id"`
	LocalHostname q `yaml:"local-hostname"`
}

// renderMetaData: the NoCloud meta-data, YAML like the other seed files.
func renderMetaData(in Input) ([]byte, error) {
	return marshal("", metaData{InstanceID: q(InstanceID(in.Node.Name, in.Generation)), LocalHostname: q(Hostname(in.Node))})
}

// Hostname is the guest's hostname: what Pigsty sets (`hostname
// {{ nodename }}`), the node's FQDN when its nodename is fully qualified,
// else its name.
func Hostname(n spec.Node) string {
	if n.FQDN != "" {
		return n.FQDN
	}
	return n.Name
}

type match struct {
	MACAddress q `yaml:"macaddress"`
}

type dhcpOverrides struct {
	RouteMetric int `yaml:"route-metric"`
}

type mgmtEthernet struct {
	Match          match         `yaml:"match"`
	DHCP4          bool          `yaml:"dhcp4"`
	DHCP6          bool          `yaml:"dhcp6"`
	DHCP4Overrides dhcpOverrides `yaml:"dhcp4-overrides"`
}

type privEthernet struct {
	Match     match    `yaml:"match"`
	DHCP4     bool     `yaml:"dhcp4"`
	DHCP6     bool     `yaml:"dhcp6"`
	AcceptRA  bool     `yaml:"accept-ra"`
	LinkLocal []string `yaml:"link-local,flow"`
	Addresses []q      `yaml:"addresses"`
}

type ethernets struct {
	Management mgmtEthernet `yaml:"management"`
	Private    privEthernet `yaml:"private"`
}

type networkConfig struct {
	Version   int       `yaml:"version"`
	Ethernets ethernets `yaml:"ethernets"`
}

// renderNetworkConfig: both NICs matched by MAC and never renamed (no
// set-name: interface names are not a contract). The private NIC has
// exactly one static address, no gateway, no routes, no nameservers.
func renderNetworkConfig(in Input, prefix int) ([]byte, error) {
	n := in.Node
	return marshal("", networkConfig{
		Version: 2,
		Ethernets: ethernets{
			Management: mgmtEthernet{
				Match: match{q(n.MAC.Management)}, DHCP4: true, DHCP6: false,
				DHCP4Overrides: dhcpOverrides{RouteMetric: 100},
			},
			Private: privEthernet{
				Match: match{q(n.MAC.Private)}, DHCP4: false, DHCP6: false,
				AcceptRA: false, LinkLocal: []string{},
				Addresses: []q{q(fmt.Sprintf("%s/%d", n.Address, prefix))},
			},
		},
	})
}

type user struct {
	Name              string   `yaml:"name"`
	UID               int      `yaml:"uid,omitempty"`
	PrimaryGroup      string   `yaml:"primary_group,omitempty"`
	NoUserGroup       bool     `yaml:"no_user_group,omitempty"`
	Shell             string   `yaml:"shell"`
	LockPasswd        bool     `yaml:"lock_passwd"`
	Sudo              q        `yaml:"sudo"`
	SSHAuthorizedKeys []string `yaml:"ssh_authorized_keys"`
}

type writeFile struct {
	Path        string `yaml:"path"`
	Owner       string `yaml:"owner"`
	Permissions q      `yaml:"permissions"`
	Content     string `yaml:"content"`
}

type growpart struct {
	Mode    string   `yaml:"mode"`
	Devices []string `yaml:"devices,flow"`
}

type cloudConfig struct {
	// Hostname is the whole FQDN for a node that has one, not its first
	// label: cloud-init 22.4 sets the hostname from meta-data's
	// local-hostname (first label) before it reads user-data, and then
	// skips set_hostname when hostname and fqdn equal what it set, however
	// prefer_fqdn_over_hostname reads. FQDN and PreferFQDN keep
	// update_hostname (Distro._select_hostname) on the FQDN too.
	Hostname         q           `yaml:"hostname"`
	FQDN             q           `yaml:"fqdn,omitempty"`
	PreferFQDN       bool        `yaml:"prefer_fqdn_over_hostname,omitempty"`
	PreserveHostname bool        `yaml:"preserve_hostname"`
	ManageEtcHosts   bool        `yaml:"manage_etc_hosts"`
	Bootcmd          [][]string  `yaml:"bootcmd,omitempty"`
	SSHPwauth        bool        `yaml:"ssh_pwauth"`
	DisableRoot      bool        `yaml:"disable_root"`
	SSHDeletekeys    bool        `yaml:"ssh_deletekeys"`
	Users            []user      `yaml:"users"`
	Growpart         growpart    `yaml:"growpart"`
	ResizeRootfs     bool        `yaml:"resize_rootfs"`
	WriteFiles       []writeFile `yaml:"write_files"`
	Runcmd           [][]string  `yaml:"runcmd"`
}

// HotplugRulesPath is the udev rule file that onlines hot-plugged vCPUs
// and memory in the guest (see hotplugRules).
const HotplugRulesPath = "/etc/udev/rules.d/80-barn-hotplug.rules"

// hotplugRules bring a vCPU or memory block QEMU hot-plugs (barn-node
// resize) online as soon as the kernel adds it: x86 Linux adds both
// offline unless built to online memory by default, and a kernel command
// line (memhp_default_state=online) is not the seed's to change. udevd
// re-reads its rules directory when it changes, so the rule applies from
// the first boot on.
const hotplugRules = `# Barn: bring hot-plugged vCPUs and memory online (barn-node resize).
SUBSYSTEM=="cpu", ACTION=="add", TEST=="online", ATTR{online}=="0", ATTR{online}="1"
SUBSYSTEM=="memory", ACTION=="add", TEST=="state", ATTR{state}=="offline", ATTR{state}="online"
`

// renderUserData: the #cloud-config. No package installs and no NTP, so the
// guest never needs the internet.
func renderUserData(in Input, prefix int, stages []string) ([]byte, error) {
	d, n := in.Deployment, in.Node
	u := user{
		Name: d.User.Name, Shell: "/bin/bash", LockPasswd: true,
		Sudo: "ALL=(ALL) NOPASSWD:ALL", SSHAuthorizedKeys: []string{in.PublicKey},
	}
	u.UID = d.User.UID // 0 (unset, the guest picks) is omitted
	var bootcmd [][]string
	if d.User.Name == spec.DbaUser {
		u.PrimaryGroup, u.NoUserGroup = "admin", true
		bootcmd = append(bootcmd, []string{"sh", "-c",
			`if getent group admin >/dev/null; then [ "$(getent group admin | cut -d: -f3)" = 88 ] || groupmod -g 88 admin; else groupadd -g 88 admin; fi`})
	}
	hosts, err := hostsBlock(in)
	if err != nil {
		return nil, err
	}
	files := []writeFile{
		{Path: ConfigDir + "/setup.env", Owner: "root:root", Permissions: "0644", Content: setupEnv(in, prefix, stages)},
		{Path: ConfigDir + "/hosts", Owner: "root:root", Permissions: "0644", Content: hosts},
		{Path: ConfigDir + "/disks", Owner: "root:root", Permissions: "0644", Content: disksTable(n)},
		{Path: ConfigDir + "/shares", Owner: "root:root", Permissions: "0644", Content: sharesTable(n)},
	}
	files = append(files, writeFile{Path: HotplugRulesPath, Owner: "root:root", Permissions: "0644", Content: hotplugRules})
	if n.Control && in.ControlPrivateKey != "" {
		sshConfig, err := ControlSSHConfig(d, in.Peers, n)
		if err != nil {
			return nil, err
		}
		key := in.ControlPrivateKey
		if !strings.HasSuffix(key, "\n") {
			key += "\n"
		}
		files = append(files,
			writeFile{Path: StateDir + "/control-id_ed25519", Owner: "root:root", Permissions: "0600", Content: key},
			writeFile{Path: StateDir + "/control-ssh-config", Owner: "root:root", Permissions: "0600", Content: sshConfig},
		)
	}
	for _, name := range scriptNames {
		body, err := Script(name)
		if err != nil {
			return nil, err
		}
		files = append(files, writeFile{Path: LibexecDir + "/" + name, Owner: "root:root", Permissions: "0755", Content: string(body)})
	}
	return marshal("#cloud-config\n", cloudConfig{
		Hostname: q(Hostname(n)), FQDN: q(n.FQDN), PreferFQDN: n.FQDN != "", PreserveHostname: false, ManageEtcHosts: false,
		Bootcmd:   bootcmd,
		SSHPwauth: false, DisableRoot: true, SSHDeletekeys: false,
		Users:        []user{u},
		Growpart:     growpart{Mode: "auto", Devices: []string{"/"}},
		ResizeRootfs: true,
		WriteFiles:   files,
		Runcmd:       [][]string{{Finalize}},
	})
}

func setupEnv(in Input, prefix int, stages []string) string {
	d, n := in.Deployment, in.Node
	uid, group, gid := "", "", ""
	if d.User.UID > 0 { // the spec's uid for any user; the identity stage checks it
		uid = fmt.Sprint(d.User.UID)
	}
	if d.User.Name == spec.DbaUser {
		group, gid = "admin", fmt.Sprint(spec.DbaUID)
	}
	control := "0"
	if n.Control {
		control = "1"
	}
	kv := [][2]string{
		{"BARN_NODE", n.Name},
		{"BARN_HOSTNAME", Hostname(n)},
		{"BARN_GENERATION", fmt.Sprint(in.Generation)},
		{"BARN_SPEC_HASH", n.SpecHash},
		{"BARN_SETUP_VERSION", SetupVersion},
		{"BARN_USER", d.User.Name},
		{"BARN_UID", uid},
		{"BARN_GROUP", group},
		{"BARN_GID", gid},
		{"BARN_MANAGEMENT_MAC", n.MAC.Management},
		{"BARN_PRIVATE_MAC", n.MAC.Private},
		{"BARN_ADDRESS", n.Address},
		{"BARN_PREFIX", fmt.Sprint(prefix)},
		{"BARN_HOST_ADDRESS", d.Subnet.Host},
		{"BARN_CONTROL", control},
		{"BARN_STAGES", strings.Join(stages, " ")},
	}
	var b strings.Builder
	b.WriteString("# Barn guest setup contract " + SetupVersion + "; rendered by barn-node.\n")
	for _, p := range kv {
		b.WriteString(p[0] + "=" + quote.Shell(p[1]) + "\n")
	}
	return b.String()
}

// allNodes returns the node and its peers, deduplicated by name, sorted by
// address then name.
func allNodes(in Input) []spec.Node {
	seen := map[string]bool{}
	var out []spec.Node
	for _, p := range append([]spec.Node{in.Node}, in.Peers...) {
		if !seen[p.Name] {
			seen[p.Name] = true
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Address != out[j].Address {
			return addrLess(out[i].Address, out[j].Address)
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func addrLess(a, b string) bool {
	var x, y [4]int
	fmt.Sscanf(a, "%d.%d.%d.%d", &x[0], &x[1], &x[2], &x[3])
	fmt.Sscanf(b, "%d.%d.%d.%d", &y[0], &y[1], &y[2], &y[3])
	for i := range x {
		if x[i] != y[i] {
			return x[i] < y[i]
		}
	}
	return false
}

// hostsBlock is the body of the guest's marked /etc/hosts block: one
// quote.HostsLine per node, "<address>\t<name> <aliases…>", or
// "<address>\t<fqdn> <name> <aliases…>" for a node with an FQDN (the
// canonical name first, so `hostname -f` prints it); the host's hosts
// block is written by the same function.
func hostsBlock(in Input) (string, error) {
	var b strings.Builder
	for _, p := range allNodes(in) {
		names := []string{p.Name}
		if p.FQDN != "" {
			names = []string{p.FQDN, p.Name}
		}
		l, err := quote.HostsLine(p.Address, append(names, p.Aliases...))
		if err != nil {
			return "", err
		}
		b.WriteString(l + "\n")
	}
	return b.String(), nil
}

func disksTable(n spec.Node) string {
	var b strings.Builder
	for _, d := range n.Disks {
		fs := d.FS
		if fs == "" {
			fs = "auto"
		}
		fmt.Fprintf(&b, "%s %s %s %s\n", d.Name, d.Serial, d.Mount, fs)
	}
	return b.String()
}

func sharesTable(n spec.Node) string {
	var b strings.Builder
	for _, s := range n.Shares {
		mode := "rw"
		if s.Readonly {
			mode = "ro"
		}
		fmt.Fprintf(&b, "%s %s %s\n", s.Tag, s.Guest, mode)
	}
	return b.String()
}

// ControlSSHConfig is the managed block the control node installs in the
// login user's ~/.ssh/config: every node by name, aliases and address,
// reached over the private network with the deployment key. Peers' host
// keys are not recorded, so recreated peers stay reachable. Names, the
// address and the user are ssh_config words (quote.SSHWord).
func ControlSSHConfig(d spec.Deployment, peers []spec.Node, self spec.Node) (string, error) {
	var b strings.Builder
	b.WriteString("# barn:begin\n")
	user, err := quote.SSHWord(d.User.Name)
	if err != nil {
		return "", err
	}
	for _, p := range allNodes(Input{Node: self, Peers: peers}) {
		var patterns []string
		for _, n := range append(append([]string{p.Name}, p.Aliases...), p.Address) {
			w, err := quote.SSHWord(n)
			if err != nil {
				return "", err
			}
			patterns = append(patterns, w)
		}
		fmt.Fprintf(&b, "Host %s\n", strings.Join(patterns, " "))
		fmt.Fprintf(&b, "  HostName %s\n  User %s\n  IdentityFile ~/.ssh/id_ed25519\n  IdentitiesOnly yes\n", patterns[len(patterns)-1], user)
		b.WriteString("  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n")
	}
	b.WriteString("# barn:end\n")
	return b.String(), nil
}
