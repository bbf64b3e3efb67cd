package plan

import (
	"bytes"
	"testing"

	"barn.dev/lib/golden"
	"barn.dev/lib/state"
)

// mixedPlan has all six outcomes: node-10 unchanged, node-11 recreate
// (aliases), node-12 start, node-13 missing, node-14 resize (memory),
// node-15 create.
func mixedPlan(t testing.TB) *Plan {
	s := testSpec(5)
	dep, nodes := applied(s, state.Running)
	nodes["node-12"].Phase = state.Stopped
	want := testSpec(6)
	want.Nodes = append(want.Nodes[:3], want.Nodes[4:]...)
	want.Nodes[1].Aliases = []string{"pg"}
	want.Nodes[3].MemoryBytes = 8 * gib
	want.Seal()
	p, err := Compute(Input{Desired: want, Applied: dep, Nodes: nodes, Resolver: catalog,
		Running: func(n *state.Node) bool { return n.Phase == state.Running }})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRenderTextGolden(t *testing.T) {
	p := mixedPlan(t)
	p.Notes = append(p.Notes, "the deployment lock is held by barn-node apply (pid 42); this plan may already be stale")
	var buf bytes.Buffer
	if err := p.RenderText(&buf); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/mixed.txt", buf.Bytes())
}

func TestRenderTextPerNodeDisksAndUnresolved(t *testing.T) {
	s := testSpec(2)
	s.Nodes[1].Disks = nil
	s.Seal()
	p, err := Compute(Input{Desired: s})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := p.RenderText(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"+ create  node-10 10.10.10.10\n          image d12:stable (unresolved)\n          2 vCPU, 4 GiB memory, 64 GiB root disk\n          data disks: /data 128 GiB (auto fs)\n",
		"          data disks: none\n",
		"totals: 4 vCPUs, 8 GiB memory, 256 GiB disk\n",
		"warning: no image catalog is active",
		"next: barn-inventory resolve | barn-plan | barn-node apply\n",
	} {
		if !bytes.Contains(buf.Bytes(), []byte(want)) {
			t.Errorf("text lacks %q:\n%s", want, buf.Bytes())
		}
	}
}
