// Package spec defines the resolved spec (barn.spec/v1): the canonical,
// defaults-filled description of the lab that barn-inventory derives from a
// Pigsty inventory and every later tool consumes, and the spec hashes that
// bind state, journals and seeds to it.
//
// Hashes are hex SHA-256 over canonical JSON (package wire):
//   - a node hash covers {deployment envelope, that node} and nothing else,
//     so adding or changing a peer never moves another node's hash;
//   - the deployment hash covers {deployment envelope, all nodes}.
//
// Neither covers the source file name, the skipped hosts or the hashes
// themselves, so renaming or moving the inventory changes no hash.
package spec

import "barn.dev/lib/wire"

// Schema is the schema name of the resolved spec document.
const Schema = "barn.spec/v1"

// DeploymentName is the constant deployment name: one deployment per user.
const DeploymentName = "barn"

// Spec is the barn.spec/v1 document.
type Spec struct {
	Schema     string     `json:"schema"`
	Source     Sources    `json:"source,omitempty"` // every file it was read from; not hashed
	Deployment Deployment `json:"deployment"`
	Nodes      []Node     `json:"nodes"`   // sorted by address
	Skipped    []Skipped  `json:"skipped"` // vm_skip hosts; not hashed
	Control    string     `json:"control"` // name of the control node
	SpecHash   string     `json:"spec_hash"`
	// Warnings are resolve-time notes for later stages (for example the
	// interface names the inventory's opaque vars reference, which
	// barn-plan surfaces). Not hashed; absent when there are none.
	Warnings []Warning `json:"warnings,omitempty"`
}

// Warning is one resolve-time warning. Code is a stable snake_case kind:
//   - "interface_name": an opaque var (Key: pg_vip_interface or
//     vip_interface, with its pg_vip_enabled/vip_enabled on) names a guest
//     NIC (Value) on Nodes instead of Pigsty's auto; Barn does not rename
//     NICs, so barn-plan must check or refuse it;
//   - "non_default_subnet": the managed hosts use a /24 other than
//     10.10.10.0/24 (Value);
//   - "admin_ip_not_managed": admin_ip (Value) is not a managed host, so
//     the control node is the lowest managed address;
//   - "admin_ip_differs": the managed hosts resolve admin_ip to different
//     addresses; Value is the control node's address Barn chose;
//   - "vars_file_shadowed", "unused_vars_file", "vars_not_a_directory",
//     "priority_in_group_vars": group_vars/host_vars files Ansible ignores
//     (or reads other than one might think);
//   - "priority_redefined": a group sets ansible_group_priority twice;
//     Ansible (and Barn) use the one parsed last;
//   - "not_a_group", "unexpected_group_key": YAML Ansible also ignores;
//   - "host_vars_to_group": a host's inline variables go to the group of
//     the same name, as Ansible's set_variable finds the group first.
type Warning struct {
	Code    string   `json:"code"`
	Message string   `json:"message"`
	Key     string   `json:"key,omitempty"`
	Value   string   `json:"value,omitempty"`
	Nodes   []string `json:"nodes,omitempty"`
	File    string   `json:"file,omitempty"` // the file it concerns, when one applies
	Line    int      `json:"line,omitempty"` // line in File, when one applies
}

// Sources lists the files a spec was read from: the inventory as the user
// named it first (a file, "<stdin>", or a directory followed by the
// inventory files read from it), then every group_vars/ and host_vars/
// file, by path. It is always a JSON list; the single string development
// builds wrote is refused like any other wrong type.
type Sources []string

// Inventory is the inventory as the user named it (the first source), ""
// when none is recorded: what `barn-inventory resolve -f` reads again.
func (s Sources) Inventory() string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// Deployment is the envelope shared by every node. Changing any field moves
// every node's hash and requires whole-deployment recreation.
type Deployment struct {
	Name   string `json:"name"`  // always DeploymentName
	Arch   string `json:"arch"`  // native, amd64 or arm64
	Image  string `json:"image"` // default image selector, canonical form
	Subnet Subnet `json:"subnet"`
	User   User   `json:"user"`
}

// Subnet is the private /24 layout: .1 is the host, .2–.8 are reserved,
// .9–.254 is the node pool.
type Subnet struct {
	CIDR     string `json:"cidr"`     // e.g. "10.10.10.0/24"
	Host     string `json:"host"`     // e.g. "10.10.10.1"
	Reserved string `json:"reserved"` // inclusive range "10.10.10.2-10.10.10.8"
	Pool     string `json:"pool"`     // inclusive range "10.10.10.9-10.10.10.254"
}

// User is the one login user of every node.
type User struct {
	Name string `json:"name"` // default "dba"
	UID  int    `json:"uid"`  // 88 for dba; 0 when unset for a custom user
}

// Node is one managed host, fully resolved.
type Node struct {
	Name string `json:"name"`
	// FQDN is the node's fully qualified host name when the inventory's
	// nodename is one (pigsty.cc names the node pigsty): the guest's
	// hostname is then the FQDN, exactly what Pigsty sets, and every
	// guest's /etc/hosts resolves both forms. Empty otherwise (and then
	// absent, so existing nodes' hashes do not move).
	FQDN          string   `json:"fqdn,omitempty"`
	Address       string   `json:"address"` // IPv4 in the subnet's pool
	Control       bool     `json:"control"`
	MAC           NICs     `json:"mac"`
	Image         string   `json:"image"` // canonical selector: family:channel or family@version
	CPUs          int      `json:"cpus"`
	MemoryBytes   int64    `json:"memory_bytes"`    // bytes, MiB-aligned
	RootDiskBytes int64    `json:"root_disk_bytes"` // bytes
	Disks         []Disk   `json:"disks"`
	Aliases       []string `json:"aliases"`
	Shares        []Share  `json:"shares"`
	SpecHash      string   `json:"spec_hash"` // node hash; not part of itself
}

// NICs holds a node's two deterministic MAC addresses, derived from its
// address (lower-case, colon-separated).
type NICs struct {
	Management string `json:"management"`
	Private    string `json:"private"`
}

// Disk is one data disk (vm_disks entry).
type Disk struct {
	Name       string `json:"name"`       // identity derived from the mount path, e.g. "data"
	Mount      string `json:"mount"`      // clean absolute guest path, e.g. "/data"
	SizeBytes  int64  `json:"size_bytes"` // bytes
	FS         string `json:"fs"`         // auto, xfs or ext4
	Persistent bool   `json:"persistent"`
	Serial     string `json:"serial"` // virtio serial, 20 chars [a-z2-7], derived from (node, disk)
}

// Share is one host directory shared with the guest over 9p (vm_shares).
type Share struct {
	Host     string `json:"host"`  // clean absolute host path
	Guest    string `json:"guest"` // clean absolute guest path
	Readonly bool   `json:"readonly"`
	Tag      string `json:"tag"` // 9p mount tag "barn-<20 hex>"
}

// Skipped is a host marked vm_skip: listed, never managed.
type Skipped struct {
	Name    string `json:"name"`
	Address string `json:"address"`
}

// NodeHash returns the node hash of n under deployment d: the hash of
// {deployment: d, node: n} with n.SpecHash cleared.
func NodeHash(d Deployment, n Node) string {
	n.SpecHash = ""
	return wire.MustHash(struct {
		Deployment Deployment `json:"deployment"`
		Node       Node       `json:"node"`
	}{d, n})
}

// DeploymentHash returns the deployment hash of s: the hash of
// {deployment, nodes} with every node's SpecHash cleared.
func DeploymentHash(s *Spec) string {
	nodes := make([]Node, len(s.Nodes))
	for i, n := range s.Nodes {
		n.SpecHash = ""
		nodes[i] = n
	}
	return wire.MustHash(struct {
		Deployment Deployment `json:"deployment"`
		Nodes      []Node     `json:"nodes"`
	}{s.Deployment, nodes})
}

// Seal fills every node's SpecHash and the deployment SpecHash.
func (s *Spec) Seal() {
	s.Schema = Schema
	for i := range s.Nodes {
		s.Nodes[i].SpecHash = NodeHash(s.Deployment, s.Nodes[i])
	}
	s.SpecHash = DeploymentHash(s)
}

// Node returns the node named name, or nil.
func (s *Spec) Node(name string) *Node {
	for i := range s.Nodes {
		if s.Nodes[i].Name == name {
			return &s.Nodes[i]
		}
	}
	return nil
}

// NodeNames returns the node names in spec order.
func (s *Spec) NodeNames() []string {
	out := make([]string, len(s.Nodes))
	for i, n := range s.Nodes {
		out[i] = n.Name
	}
	return out
}
