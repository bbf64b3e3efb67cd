// Package cidata renders a node's NoCloud seed (the three cloud-init files
// meta-data, user-data and network-config) and writes it as an ISO9660
// image with volume id "cidata" (Joliet + Rock Ridge).
//
// Render is pure: the same Input always gives the same bytes (golden-tested
// in testdata/). WriteISO is the only function that touches the disk.
//
// The guest contract rendered here (see
// barn-reference-behaviour.md §3.9–3.13):
//   - meta-data: instance-id "barn-<node>-g<generation>", local-hostname
//     (the hostname: the node's FQDN when it has one, else its name);
//   - network-config v2: the management NIC and the private NIC are both
//     matched by MAC and never renamed (no set-name); management uses DHCP,
//     private carries exactly the inventory address as a static /24 with no
//     gateway, no route, no DNS, no DHCP and no RA;
//   - user-data: hostname (the node name, or its FQDN with fqdn and
//     prefer_fqdn_over_hostname when it has one, so the guest's hostname is
//     the FQDN, exactly what Pigsty sets), the login user with
//     the deployment key and passwordless sudo, helper scripts under
//     /usr/local/libexec/barn-*, the stage configuration under /etc/barn/
//     (its hosts block names every node, FQDN and alias) and runcmd
//     running the stage runner /usr/local/libexec/barn-finalize.
package cidata

import (
	"fmt"
	"net/netip"
	"strings"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/spec"
)

// SetupVersion identifies the guest helper scripts' contract. The ready
// marker carries it; a guest reporting an older value needs its helpers
// updated in place (warning stage "setup-update").
const SetupVersion = "barn-setup/1"

// Guest paths of the setup contract.
const (
	LibexecDir   = "/usr/local/libexec"
	ConfigDir    = "/etc/barn"
	StateDir     = "/var/lib/barn"
	ReadyFile    = StateDir + "/ready.json"     // {node, generation, spec_hash, setup_version, warnings[], repairs[], disks[]}
	ErrorFile    = StateDir + "/error.json"     // {exit_status, stage, detail}
	WarningsFile = StateDir + "/warnings.jsonl" // one {stage, detail} per line
	Finalize     = LibexecDir + "/barn-finalize"
)

// Stage names. Identity is required; the others are optional.
const (
	StageIdentity       = "identity"
	StageHosts          = "hosts"
	StageDataDisks      = "data-disks"
	StageShares         = "shares"
	StageControlSSH     = "control-ssh"
	StagePrivateNetwork = "private-network"
)

// OptionalStages lists the optional stages in run order with their guest
// timeouts in seconds.
var OptionalStages = []struct {
	Name    string
	Seconds int
}{
	{StageHosts, 30},
	{StageDataDisks, 90},
	{StageShares, 30},
	{StageControlSSH, 30},
	{StagePrivateNetwork, 30},
}

// Input is everything a node's seed depends on.
type Input struct {
	Deployment spec.Deployment
	Node       spec.Node
	Peers      []spec.Node // every node of the deployment (the node itself may be included)
	Generation int64       // ≥1; part of the instance-id
	PublicKey  string      // authorized_keys line of the deployment key; must be ssh-ed25519
	// ControlPrivateKey is the deployment private key (OpenSSH PEM). Only
	// the control node may receive it; it must be empty for other nodes.
	ControlPrivateKey string
	// Stages are the optional stages the first boot runs; nil means
	// DefaultStages(Node).
	Stages []string
}

// Files are the three NoCloud seed files.
type Files struct {
	MetaData, UserData, NetworkConfig []byte
}

// DefaultStages returns the optional stages that apply to n, in run order:
// hosts, data-disks (when n has disks), shares (when n has shares),
// control-ssh (control node only), private-network.
func DefaultStages(n spec.Node) []string {
	out := []string{StageHosts}
	if len(n.Disks) > 0 {
		out = append(out, StageDataDisks)
	}
	if len(n.Shares) > 0 {
		out = append(out, StageShares)
	}
	if n.Control {
		out = append(out, StageControlSSH)
	}
	return append(out, StagePrivateNetwork)
}

// IsOptionalStage reports whether s names an optional stage.
func IsOptionalStage(s string) bool {
	for _, st := range OptionalStages {
		if st.Name == s {
			return true
		}
	}
	return false
}

// InstanceID is the cloud-init instance-id of a node at a generation.
func InstanceID(node string, generation int64) string {
	return fmt.Sprintf("barn-%s-g%d", node, generation)
}

// Render returns the seed files for in. It fails with a usage error naming
// the field and value when the input cannot produce a valid seed.
func Render(in Input) (Files, error) {
	prefix, err := validate(in)
	if err != nil {
		return Files{}, err
	}
	stages := in.Stages
	if stages == nil {
		stages = DefaultStages(in.Node)
	}
	meta, err := renderMetaData(in)
	if err != nil {
		return Files{}, err
	}
	netcfg, err := renderNetworkConfig(in, prefix)
	if err != nil {
		return Files{}, err
	}
	user, err := renderUserData(in, prefix, stages)
	if err != nil {
		return Files{}, err
	}
	return Files{MetaData: meta, UserData: user, NetworkConfig: netcfg}, nil
}

func bad(field, value, why string) error {
	return exitcode.New(exitcode.Usage, "seed input %s = %q: %s", field, value, why).WithReason("seed_input_invalid")
}

// validate checks the seed input: the deployment envelope and the node
// by the spec's own rules (spec.Deployment.Validate, spec.ValidateNode),
// each peer's name, aliases and address, and what only a seed has: the
// generation, the keys and the stages.
func validate(in Input) (int, error) {
	n := in.Node
	if err := in.Deployment.Validate(); err != nil {
		return 0, bad(err.Field, fmt.Sprint(err.Value), err.Problem)
	}
	if err := spec.ValidateNode(in.Deployment, n); err != nil {
		return 0, bad(err.Field, fmt.Sprint(err.Value), err.Problem)
	}
	if in.Generation < 1 {
		return 0, bad("generation", fmt.Sprint(in.Generation), "must be at least 1")
	}
	if !strings.HasPrefix(in.PublicKey, "ssh-ed25519 ") || strings.ContainsAny(in.PublicKey, "\n\r") {
		return 0, bad("public_key", in.PublicKey, "must be one ssh-ed25519 authorized_keys line")
	}
	if in.ControlPrivateKey != "" && !n.Control {
		return 0, bad("control_private_key", "(set)", "only the control node receives the deployment private key")
	}
	pfx := netip.MustParsePrefix(in.Deployment.Subnet.CIDR) // valid: checked above
	for _, p := range in.Peers {
		if v := spec.CheckNodeName(p.Name); v != nil {
			return 0, bad("peers["+p.Name+"].name", p.Name, v.Problem)
		}
		if v := spec.CheckFQDN(p.Name, p.FQDN); v != nil {
			return 0, bad("peers["+p.Name+"].fqdn", p.FQDN, v.Problem)
		}
		for _, a := range p.Aliases {
			if v := spec.CheckAlias(a); v != nil {
				return 0, bad("peers["+p.Name+"].aliases", a, v.Problem)
			}
		}
		if a, err := netip.ParseAddr(p.Address); err != nil || !pfx.Contains(a) {
			return 0, bad("peers["+p.Name+"].address", p.Address, "not inside "+pfx.String())
		}
	}
	for _, s := range in.Stages {
		if !IsOptionalStage(s) {
			return 0, bad("stages", s, "not an optional stage")
		}
	}
	return pfx.Bits(), nil
}
