package lifecycle

import (
	"net/netip"
	"reflect"
	"slices"
	"sort"
	"strings"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/plan"
	"barn.dev/lib/spec"
	"barn.dev/lib/state"
)

// keepPeers is the applied spec after applying the plan's definitions of
// names (verb, e.g. "recreating", for the message) while every other
// node keeps the definition it was applied with (selectedSpec), so a peer
// that drifted or that the inventory omits for now need not be applied in
// the same operation. applied nil means no deployment yet: the selection
// alone is the new deployment. promoted names the applied control node
// when destroy promoted it (its guest was not built as the control node,
// see promoteControl): a selected node the plan makes the control node
// takes the role back from it, and it keeps the role when it is itself
// selected and nobody else takes it. Refused before anything changes, with
// whole (the command that applies every node) as the next: hint:
//   - deployment-wide settings that differ from the applied ones
//     (conflict, deployment_settings_changed: only a command on the whole
//     deployment applies them);
//   - selected definitions that do not fit beside their peers' applied
//     ones: a duplicate address, name or alias, no control node or a
//     second one (conflict, selection_conflict).
func keepPeers(p *plan.Plan, applied *state.Deployment, names []string, promoted, verb, whole string) (spec.Spec, error) {
	if applied != nil && !reflect.DeepEqual(applied.Spec.Deployment, p.Spec.Deployment) {
		return spec.Spec{}, exitcode.New(exitcode.Conflict, "deployment-wide settings changed; %s selected nodes cannot apply them", verb).
			WithReason("deployment_settings_changed").WithNext(whole)
	}
	if c := p.Spec.Control; promoted != "" && c != promoted && slices.Contains(names, c) && !slices.Contains(names, promoted) {
		applied = demoted(applied, promoted)
	}
	out := selectedSpec(p, applied, names)
	if n := out.Node(promoted); out.Control == "" && n != nil {
		// Recreating the promoted node alone keeps its role: no other
		// node has it until the inventory's control node is applied.
		n.Control, out.Control = true, promoted
		out.Seal()
	}
	if ferr := out.Validate(); ferr != nil {
		return spec.Spec{}, exitcode.New(exitcode.Conflict, "%s %s beside the applied definitions of the other nodes: %v", verb, strings.Join(names, ", "), ferr).
			WithReason("selection_conflict").WithNext("fix the inventory, or select the other nodes too: " + whole)
	}
	return out, nil
}

// demoted is a copy of applied in which node name is not the control node.
func demoted(applied *state.Deployment, name string) *state.Deployment {
	d := *applied
	d.Spec.Nodes = slices.Clone(applied.Spec.Nodes)
	if n := d.Spec.Node(name); n != nil {
		n.Control = false
	}
	return &d
}

// selectedSpec is the applied spec after applying names: the applied
// spec (the plan's deployment settings and no nodes when applied is nil)
// with those nodes' definitions (added when new) taken from the plan, so
// that every unselected node, drifted or omitted, keeps the definition it
// was applied with. Nodes stay sorted by address; the control node is the
// one whose definition says so.
func selectedSpec(p *plan.Plan, applied *state.Deployment, names []string) spec.Spec {
	out := p.Spec
	var before []spec.Node
	if applied != nil {
		out, before = applied.Spec, applied.Spec.Nodes
	}
	out.Nodes = nil
	take := map[string]bool{}
	for _, n := range names {
		take[n] = true
		out.Nodes = append(out.Nodes, *p.Spec.Node(n))
	}
	for _, n := range before {
		if !take[n.Name] {
			out.Nodes = append(out.Nodes, n)
		}
	}
	sort.SliceStable(out.Nodes, func(i, j int) bool { return addrLess(out.Nodes[i].Address, out.Nodes[j].Address) })
	out.Control = ""
	for _, n := range out.Nodes {
		if n.Control {
			out.Control = n.Name
		}
	}
	out.Seal()
	return out
}

// addrLess orders IPv4 addresses numerically (as text when unparsable).
func addrLess(a, b string) bool {
	x, errX := netip.ParseAddr(a)
	y, errY := netip.ParseAddr(b)
	if errX != nil || errY != nil {
		return a < b
	}
	return x.Less(y)
}
