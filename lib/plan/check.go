package plan

import (
	"net/netip"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/spec"
	"barn.dev/lib/state"
)

// minMemoryBytes is the least memory a node may have (barn-inventory's
// limit, 512 MiB).
const minMemoryBytes = 512 << 20

// checkDesired validates what the planner relies on in a desired spec:
// schema, 1..MaxNodes nodes, unique valid names (a node name becomes a
// directory under the state root), unique addresses, cpus 1–256, memory
// at least 512 MiB, positive disk sizes, exactly one
// control node, and sealed hashes (a spec edited by hand after
// `barn-inventory resolve` is refused rather than silently re-hashed).
// Every failure is usage (2).
func checkDesired(d *spec.Spec) error {
	if d == nil {
		return exitcode.New(exitcode.Usage, "no desired spec given").WithReason("invalid_spec")
	}
	bad := func(reason, format string, args ...any) error {
		return exitcode.New(exitcode.Usage, format, args...).WithReason(reason).
			WithNext("barn-inventory resolve -f INVENTORY | barn-plan")
	}
	if d.Schema != spec.Schema {
		return bad("invalid_spec", "desired spec: schema %q, want %q", d.Schema, spec.Schema)
	}
	if len(d.Nodes) == 0 || len(d.Nodes) > MaxNodes {
		return bad("invalid_spec", "desired spec: %d nodes, want 1 to %d", len(d.Nodes), MaxNodes)
	}
	names := make(map[string]bool, len(d.Nodes))
	addrs := make(map[string]string, len(d.Nodes))
	controls := 0
	for _, n := range d.Nodes {
		if n.Name == "" {
			return bad("invalid_spec", "desired spec: node at %s has no name", n.Address)
		}
		if names[n.Name] {
			return bad("invalid_spec", "desired spec: node name %q appears twice", n.Name)
		}
		names[n.Name] = true
		if !state.ValidNodeName(n.Name) {
			return bad("invalid_spec", "desired spec: node name %q is not a valid node name (want ^[a-z0-9][a-z0-9_.-]{0,63}$)", n.Name)
		}
		if n.CPUs < 1 || n.CPUs > 256 {
			return bad("invalid_spec", "desired spec: node %s cpus %d, want 1 to 256", n.Name, n.CPUs)
		}
		if n.MemoryBytes < minMemoryBytes {
			return bad("invalid_spec", "desired spec: node %s memory_bytes %d, want at least %d (512 MiB)", n.Name, n.MemoryBytes, minMemoryBytes)
		}
		if n.RootDiskBytes <= 0 {
			return bad("invalid_spec", "desired spec: node %s root_disk_bytes %d, want a positive size in bytes", n.Name, n.RootDiskBytes)
		}
		for _, dk := range n.Disks {
			if dk.SizeBytes <= 0 {
				return bad("invalid_spec", "desired spec: node %s disk %s size_bytes %d, want a positive size in bytes", n.Name, dk.Name, dk.SizeBytes)
			}
		}
		if a, err := netip.ParseAddr(n.Address); err != nil || !a.Is4() {
			return bad("invalid_spec", "desired spec: node %s address %q is not an IPv4 address", n.Name, n.Address)
		}
		if other, dup := addrs[n.Address]; dup {
			return bad("invalid_spec", "desired spec: nodes %s and %s share address %s", other, n.Name, n.Address)
		}
		addrs[n.Address] = n.Name
		if n.Control {
			controls++
		}
		if h := spec.NodeHash(d.Deployment, n); n.SpecHash != h {
			return bad("spec_hash_mismatch", "desired spec: node %s spec_hash %q does not match its definition (%s); the spec was edited after it was resolved", n.Name, n.SpecHash, h)
		}
	}
	if controls != 1 {
		return bad("invalid_spec", "desired spec: %d control nodes, want exactly 1", controls)
	}
	if h := spec.DeploymentHash(d); d.SpecHash != h {
		return bad("spec_hash_mismatch", "desired spec: spec_hash %q does not match its content (%s); the spec was edited after it was resolved", d.SpecHash, h)
	}
	return nil
}

// checkApplied cross-checks the applied evidence the caller read: the
// deployment's spec_hash against its spec, and every committed node state
// against the name it was found under. Failures are integrity (7).
func checkApplied(a *state.Deployment, nodes map[string]*state.Node) error {
	if a != nil {
		if h := spec.DeploymentHash(&a.Spec); a.SpecHash != h {
			return exitcode.New(exitcode.Integrity, "applied deployment state: spec_hash %q does not match its stored spec (%s)", a.SpecHash, h).
				WithReason("state_hash_mismatch").WithNext("barn-state verify")
		}
	}
	for name, n := range nodes {
		if n == nil {
			continue
		}
		if n.Node != name || n.Spec.Name != name {
			return exitcode.New(exitcode.Integrity, "committed node state %s names node %q (spec %q)", name, n.Node, n.Spec.Name).
				WithReason("node_state_mismatch").WithNext("barn-state verify")
		}
		if n.Phase != state.Absent && n.SpecHash == "" {
			return exitcode.New(exitcode.Integrity, "committed node state %s has no spec_hash", name).
				WithReason("node_state_mismatch").WithNext("barn-state verify")
		}
	}
	return nil
}
