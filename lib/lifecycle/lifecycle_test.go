package lifecycle

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/plan"
	"barn.dev/lib/state"
)

func testRoot(t *testing.T) *state.Root {
	t.Helper()
	home := filepath.Join(t.TempDir(), ".barn")
	rt, err := os.MkdirTemp("/tmp", "lt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(rt) })
	env := map[string]string{"BARN_HOME": home, "BARN_RUNTIME_DIR": rt, "HOME": os.Getenv("HOME")}
	root, err := state.Open(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func TestPortAllocatorSkipsRecordedAndBoundPorts(t *testing.T) {
	m := &Manager{Root: testRoot(t), PortBase: 3000, PortFree: func(p int) bool { return p != 3001 }}
	a, err := m.newPortAllocator()
	if err != nil {
		t.Fatal(err)
	}
	a.taken[3000] = true // as if recorded in a node's state
	got := []int{}
	for i := 0; i < 3; i++ {
		p, err := a.next()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p)
	}
	if got[0] != 3002 || got[1] != 3003 || got[2] != 3004 {
		t.Fatalf("ports = %v, want [3002 3003 3004]", got)
	}
}

func TestPortAllocatorExhaustedIsResource(t *testing.T) {
	m := &Manager{Root: testRoot(t), PortBase: MaxPort, PortFree: func(int) bool { return false }}
	a, _ := m.newPortAllocator()
	if _, err := a.next(); exitcode.ClassOf(err) != exitcode.Resource {
		t.Fatalf("err = %v, want resource", err)
	}
}

func TestStalePlanIsConflict(t *testing.T) {
	p := &plan.Plan{BasedOn: plan.BasedOn{Generation: 1, SpecHash: "a"}}
	err := checkBasedOn(p, &state.Deployment{Generation: 2, SpecHash: "b"}, applyAgain("lab.yml", nil))
	if e := exitcode.As(err); e == nil || e.Class != exitcode.Conflict || e.Reason != "stale_plan" || e.Next != "barn-inventory resolve -f lab.yml | barn-plan | barn-node apply" {
		t.Fatalf("err = %+v", e)
	}
	if err := checkBasedOn(&plan.Plan{}, nil, ""); err != nil {
		t.Fatalf("no deployment, empty based_on: %v", err)
	}
}

func TestResultErrIsPartialNamingEachNode(t *testing.T) {
	r := newResult("apply")
	if r.Err(2) != nil {
		t.Fatal("no failures must be nil")
	}
	r.fail("n2", "start", exitcode.New(exitcode.Runtime, "boom").WithNext("barn-node logs n2"))
	err := r.Err(3)
	e := exitcode.As(err)
	if e.Class != exitcode.Partial || !strings.Contains(e.Message, "1 of 3 node(s) failed: n2 (start: boom)") || e.Next != "barn-node logs n2" {
		t.Fatalf("err = %+v", e)
	}
}
