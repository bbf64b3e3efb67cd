package lifecycle

import (
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/plan"
	"barn.dev/lib/spec"
	"barn.dev/lib/state"
)

func deploymentOf(gen int64, hash string, names ...string) *state.Deployment {
	d := &state.Deployment{Generation: gen}
	d.SpecHash = hash
	for _, n := range names {
		d.Spec.Nodes = append(d.Spec.Nodes, spec.Node{Name: n})
	}
	return d
}

func TestRecreateScopeRefusesOmittedNodesBeforeAnything(t *testing.T) {
	p := &plan.Plan{Nodes: []plan.NodePlan{{Name: "a", Outcome: plan.Recreate}, {Name: "c", Outcome: plan.Missing}}}
	p.Spec.Nodes = []spec.Node{{Name: "a"}}
	for _, sel := range [][]string{nil, {"a"}} {
		_, err := RecreateScope(p, sel)
		if e := exitcode.As(err); err == nil || e.Reason != "nodes_removed" || exitcode.ClassOf(err) != exitcode.Conflict {
			t.Fatalf("selectors %v: err = %v, want conflict nodes_removed", sel, err)
		}
	}
	p.Nodes = p.Nodes[:1]
	p.Spec.Nodes = []spec.Node{{Name: "b"}, {Name: "a"}}
	if got, err := RecreateScope(p, nil); err != nil || strings.Join(got, " ") != "a b" {
		t.Fatalf("whole scope = %v, %v; want every node of the spec, sorted", got, err)
	}
	if got, _ := RecreateScope(p, []string{"b", "a", "b"}); strings.Join(got, " ") != "a b" {
		t.Fatalf("selected scope = %v; want a b", got)
	}
}

func TestWholeRecreateRecheckUnderLockIsDeploymentChanged(t *testing.T) {
	m := &Manager{Root: testRoot(t)}
	p := &plan.Plan{BasedOn: plan.BasedOn{Generation: 1, SpecHash: "h1"}}
	scope := []string{"a", "b"}
	cases := []struct {
		name   string
		d      *state.Deployment
		reason string
	}{
		{"unchanged", deploymentOf(1, "h1", "a", "b"), ""},
		{"another generation applied", deploymentOf(2, "h2", "a", "b"), "deployment_changed"},
		{"same generation, other spec", deploymentOf(1, "h9", "a", "b"), "deployment_changed"},
		{"an applied node outside the scope", deploymentOf(1, "h1", "a", "b", "c"), "deployment_changed"},
		{"nothing applied", nil, "no_deployment"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := m.checkWholeScope(p, c.d, scope)
			if c.reason == "" {
				if err != nil {
					t.Fatalf("err = %v, want nil", err)
				}
				return
			}
			if e := exitcode.As(err); err == nil || e.Reason != c.reason || exitcode.ClassOf(err) != exitcode.Conflict {
				t.Fatalf("err = %v, want conflict %s", err, c.reason)
			}
		})
	}
}
