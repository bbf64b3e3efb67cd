package plan

import (
	"barn.dev/lib/exitcode"
	"barn.dev/lib/spec"
	"barn.dev/lib/state"
)

// checkDesired validates what the planner relies on in a desired spec:
// every rule barn-inventory guarantees (spec.Validate: schema, 1 to
// spec.MaxNodes nodes, valid unique names and addresses, cpus, memory,
// disk sizes, one control node, ...) and sealed hashes (a spec edited by
// hand after `barn-inventory resolve` is refused rather than silently
// re-hashed). Every failure is usage (2).
func checkDesired(d *spec.Spec) error {
	if d == nil {
		return exitcode.New(exitcode.Usage, "no desired spec given").WithReason("invalid_spec")
	}
	bad := func(reason, format string, args ...any) error {
		return exitcode.New(exitcode.Usage, format, args...).WithReason(reason).
			WithNext(spec.Pipeline(d.Source.Inventory(), ""))
	}
	if err := d.Validate(); err != nil {
		return bad("invalid_spec", "desired spec: %v; %s", err, err.Hint)
	}
	for _, n := range d.Nodes {
		if h := spec.NodeHash(d.Deployment, n); n.SpecHash != h {
			return bad("spec_hash_mismatch", "desired spec: node %s spec_hash %q does not match its definition (%s); the spec was edited after it was resolved", n.Name, n.SpecHash, h)
		}
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
