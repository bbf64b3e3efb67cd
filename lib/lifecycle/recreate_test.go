package lifecycle

import (
	"fmt"
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
	_, err := RecreateScope(p, nil)
	if e := exitcode.As(err); err == nil || e.Reason != "nodes_removed" || exitcode.ClassOf(err) != exitcode.Conflict {
		t.Fatalf("whole: err = %v, want conflict nodes_removed", err)
	}
	if got, err := RecreateScope(p, []string{"a"}); err != nil || strings.Join(got, " ") != "a" {
		t.Fatalf("a selection beside an omitted peer = %v, %v; want a", got, err)
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

// selectionFixture is an applied deployment of a (control, .10), b (.11)
// and c (.12), valid as barn-inventory resolves it, and a plan whose spec
// changes a's memory, drifts b's alias and omits c.
func selectionFixture() (*plan.Plan, *state.Deployment) {
	node := func(name string, oct int) spec.Node {
		return spec.Node{Name: name, Address: fmt.Sprintf("10.10.10.%d", oct), Control: oct == 10,
			MAC:   spec.NICs{Management: fmt.Sprintf("52:54:00:00:00:%02x", oct), Private: fmt.Sprintf("52:54:00:01:00:%02x", oct)},
			Image: "d12:stable", CPUs: 2, MemoryBytes: 1 << 30, RootDiskBytes: 8 << 30,
			Aliases: []string{}, Shares: []spec.Share{}, Disks: []spec.Disk{}}
	}
	d := &state.Deployment{Generation: 1}
	d.Spec = spec.Spec{Deployment: spec.Deployment{
		Name: spec.DeploymentName, Arch: "amd64", Image: "d12:stable",
		Subnet: spec.Subnet{CIDR: "10.10.10.0/24", Host: "10.10.10.1", Reserved: "10.10.10.2-10.10.10.8", Pool: "10.10.10.9-10.10.10.254"},
		User:   spec.User{Name: "dba", UID: 88},
	}, Nodes: []spec.Node{node("a", 10), node("b", 11), node("c", 12)}, Control: "a", Skipped: []spec.Skipped{}}
	d.Spec.Seal()
	if err := d.Spec.Validate(); err != nil {
		panic(err)
	}
	p := &plan.Plan{Spec: d.Spec}
	p.Spec.Nodes = []spec.Node{node("a", 10), node("b", 11)}
	p.Spec.Nodes[0].MemoryBytes = 2 << 30
	p.Spec.Nodes[1].Aliases = []string{"db"}
	p.Spec.Seal()
	return p, d
}

func TestSelectedRecreateKeepsAppliedDefinitionsOfPeers(t *testing.T) {
	p, d := selectionFixture()
	out := selectedSpec(p, d, []string{"a"})
	if got := out.Node("a"); got == nil || got.MemoryBytes != 2<<30 {
		t.Fatalf("a = %+v, want the desired definition", got)
	}
	if got := out.Node("b"); got == nil || len(got.Aliases) != 0 {
		t.Fatalf("drifted peer b = %+v, want its applied definition", got)
	}
	if out.Node("c") == nil {
		t.Fatal("omitted peer c was dropped from the applied spec")
	}
	if out.Control != "a" || out.Nodes[0].Name != "a" || out.Nodes[2].Name != "c" {
		t.Fatalf("control %q order %v", out.Control, out.NodeNames())
	}
}

func TestSelectedRecreateRefusesConflictsWithPeers(t *testing.T) {
	cases := []struct {
		name   string
		change func(p *plan.Plan)
		reason string
		msg    string
	}{
		{"address of an omitted peer", func(p *plan.Plan) { p.Spec.Nodes[0].Address = "10.10.10.12" }, "selection_conflict", "is also the address of node"},
		{"alias naming a peer", func(p *plan.Plan) { p.Spec.Nodes[0].Aliases = []string{"c"} }, "selection_conflict", "duplicates a name or alias"},
		{"control moves away from the selection", func(p *plan.Plan) { p.Spec.Nodes[0].Control = false }, "selection_conflict", "control"},
		{"deployment-wide settings", func(p *plan.Plan) { p.Spec.Deployment.Arch = "arm64" }, "deployment_settings_changed", "deployment-wide"},
	}
	p, d := selectionFixture()
	if _, err := recreateSelection(p, d, []string{"a"}, "", false); err != nil {
		t.Fatalf("the unchanged fixture: %v", err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, d := selectionFixture()
			c.change(p)
			_, err := recreateSelection(p, d, []string{"a"}, "", false)
			if e := exitcode.As(err); err == nil || e.Reason != c.reason || exitcode.ClassOf(err) != exitcode.Conflict || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("err = %v, want conflict %s saying %q", err, c.reason, c.msg)
			}
		})
	}
}
