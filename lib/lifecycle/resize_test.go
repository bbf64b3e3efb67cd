package lifecycle

import (
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/plan"
	"barn.dev/lib/spec"
	"barn.dev/lib/state"
)

// resizePlan is a two-node plan: a resize, b the given outcome.
func resizePlan(other plan.Outcome) *plan.Plan {
	return &plan.Plan{Nodes: []plan.NodePlan{{Name: "a", Outcome: plan.Resize}, {Name: "b", Outcome: other}}}
}

func TestResizeSelection(t *testing.T) {
	applied := &state.Deployment{Generation: 1}
	cases := []struct {
		name      string
		p         *plan.Plan
		applied   *state.Deployment
		selectors []string
		want      string
		reason    string
	}{
		{"no selectors: every resize node", resizePlan(plan.Unchanged), applied, nil, "a", ""},
		{"duplicates collapse", resizePlan(plan.Resize), applied, []string{"b", "a", "b"}, "a b", ""},
		{"an unchanged node is not resizable", resizePlan(plan.Unchanged), applied, []string{"b"}, "", "not_resizable"},
		{"a recreate node is not resizable", resizePlan(plan.Recreate), applied, []string{"a", "b"}, "", "not_resizable"},
		{"unknown node", resizePlan(plan.Unchanged), applied, []string{"zz"}, "", "unknown_node"},
		{"nothing to resize", &plan.Plan{Nodes: []plan.NodePlan{{Name: "a", Outcome: plan.Start}}}, applied, nil, "", "no_selection"},
		{"no deployment", resizePlan(plan.Unchanged), nil, nil, "", "no_deployment"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := resizeSelection(c.p, c.applied, c.selectors)
			if c.reason != "" {
				if e := exitcode.As(err); err == nil || e.Reason != c.reason {
					t.Fatalf("err = %v, want reason %s", err, c.reason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := strings.Join(got, " "); s != c.want {
				t.Fatalf("selection = %q, want %q", s, c.want)
			}
		})
	}
}

// A resize records the new definitions of the resized nodes only: every
// other node keeps the definition it was applied with, so the applied
// spec stays true for peers that drift or are not selected.
func TestResizedSpecKeepsPeersApplied(t *testing.T) {
	node := func(name, addr string, mem int64) spec.Node {
		return spec.Node{Name: name, Address: addr, CPUs: 1, MemoryBytes: mem, RootDiskBytes: 8 << 30}
	}
	old := spec.Spec{Nodes: []spec.Node{node("a", "10.10.10.10", 512<<20), node("b", "10.10.10.11", 512<<20)}}
	old.Seal()
	desired := spec.Spec{Nodes: []spec.Node{node("a", "10.10.10.10", 1<<30), node("b", "10.10.10.11", 2<<30)}}
	desired.Seal()
	got := resizedSpec(&plan.Plan{Spec: desired}, &state.Deployment{Spec: old}, []string{"a"})
	if got.Node("a").MemoryBytes != 1<<30 || got.Node("b").MemoryBytes != 512<<20 {
		t.Fatalf("memory a=%d b=%d, want a resized, b as applied", got.Node("a").MemoryBytes, got.Node("b").MemoryBytes)
	}
	if got.SpecHash != spec.DeploymentHash(&got) || got.Node("a").SpecHash != desired.Node("a").SpecHash {
		t.Fatal("the written spec must be sealed, with a's desired node hash")
	}
	if old.Node("a").MemoryBytes != 512<<20 {
		t.Fatal("resizedSpec changed the applied spec it was given")
	}
}

// The R3 hint names an overlay's size as a vm_disk value the inventory
// takes (whole units; fractions are refused there).
func TestVMDiskValue(t *testing.T) {
	for b, want := range map[int64]string{8 << 30: "8GiB", 8<<30 + 512<<20: "8704MiB", 8<<30 + 1: "8589934593B"} {
		if got := vmDiskValue(b); got != want {
			t.Errorf("vmDiskValue(%d) = %q, want %q", b, got, want)
		}
	}
}
