package plan

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/state"
)

// An override changes only the selected nodes, in the plan's spec (which
// is sealed again), and its flags come back in every next: hint.
func TestOverridesChangeOnlyTheSelectedNodes(t *testing.T) {
	s := testSpec(3)
	dep, nodes := applied(s, state.Running)
	o := &Overrides{MemoryBytes: 8 * gib, Args: []string{"--mem=8GiB"}}
	p := mustCompute(t, Input{Desired: s, Applied: dep, Nodes: nodes, Resolver: catalog, Selected: []string{"node-11"}, Overrides: o})
	if got, w := outcomes(p), "node-11=resize(resources_changed)"; got != w {
		t.Fatalf("outcomes = %s, want %s", got, w)
	}
	if p.Spec.Node("node-11").MemoryBytes != 8*gib || p.Spec.Node("node-10").MemoryBytes != 4*gib {
		t.Fatalf("memory node-11 %d node-10 %d", p.Spec.Node("node-11").MemoryBytes, p.Spec.Node("node-10").MemoryBytes)
	}
	if p.Spec.SpecHash == s.SpecHash || s.Node("node-11").MemoryBytes != 4*gib {
		t.Fatal("the override must reseal the plan's spec and leave the desired spec alone")
	}
	if !reflect.DeepEqual(p.Next, []string{"barn-inventory resolve | barn-plan --mem=8GiB node-11 | barn-node resize node-11 --force"}) {
		t.Fatalf("next = %q", p.Next)
	}
	if p.Overrides == nil || p.Overrides.MemoryBytes != 8*gib {
		t.Fatalf("overrides = %+v", p.Overrides)
	}
	// Without the override the applied value is drift like any other.
	p = mustCompute(t, Input{Desired: s, Applied: dep, Nodes: nodes, Resolver: catalog})
	if p.Overrides != nil {
		t.Fatalf("overrides = %+v, want none", p.Overrides)
	}
}

func TestOverrideTheSpecRefusesIsUsage(t *testing.T) {
	s := testSpec(2)
	_, err := Compute(Input{Desired: s, Resolver: catalog, Overrides: &Overrides{MemoryBytes: 1 << 20, Args: []string{"--mem=1MiB"}}})
	e := wantClass(t, err, exitcode.Usage, "invalid_override")
	if !strings.Contains(e.Message, "--mem=1MiB") {
		t.Fatalf("message %q does not name the override", e.Message)
	}
}

// After the control node was destroyed the plan says that the inventory's
// control node and the applied one differ, and what to do.
func TestControlNodeDiffers(t *testing.T) {
	s := testSpec(3)
	dep, nodes := applied(s, state.Running)
	delete(nodes, "node-10")
	dep.Spec.Nodes = slices.Clone(dep.Spec.Nodes[1:])
	dep.Spec.Nodes[0].Control, dep.Spec.Control = true, "node-11"
	dep.Spec.Seal()
	dep.SpecHash = dep.Spec.SpecHash
	p := mustCompute(t, Input{Desired: s, Applied: dep, Nodes: nodes, Resolver: catalog})
	var msg string
	for _, w := range p.Warnings {
		if w.Code == "control_node_differs" {
			msg = w.Message
		}
	}
	for _, want := range []string{"admin_ip makes node-10 (10.10.10.10) the control node", "applied control node is node-11", "creates it as the control node again", "set admin_ip to 10.10.10.11"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("warning %q lacks %q", msg, want)
		}
	}
	dep2, nodes2 := applied(s, state.Running)
	for _, w := range mustCompute(t, Input{Desired: s, Applied: dep2, Nodes: nodes2, Resolver: catalog}).Warnings {
		if w.Code == "control_node_differs" {
			t.Fatalf("warning without a difference: %s", w.Message)
		}
	}
}
