package plan

import (
	"syscall"
	"testing"

	"barn.dev/lib/spec"
	"barn.dev/lib/state"
	"barn.dev/lib/wire"
)

// BenchmarkPlan20 plans 20 desired nodes against a 20-node applied state
// (one node's aliases changed), including the strict decoding of the
// desired barn.spec/v1 JSON. Target: under 10 ms per plan.
func BenchmarkPlan20(b *testing.B) {
	applied20 := testSpec(20)
	dep, nodes := applied(applied20, state.Running)
	want := testSpec(20)
	want.Nodes[7].Aliases = []string{"pg"}
	want.Seal()
	raw, err := wire.Marshal(want)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	n := 0
	for b.Loop() {
		n++
		var s spec.Spec
		if err := wire.DecodeStrict(raw, &s); err != nil {
			b.Fatal(err)
		}
		p, err := Compute(Input{Desired: &s, Applied: dep, Nodes: nodes, Resolver: catalog})
		if err != nil {
			b.Fatal(err)
		}
		if p.Action != ActionRecreate {
			b.Fatalf("action = %s", p.Action)
		}
	}
	// Process CPU time per plan: wall time on a loaded machine mostly
	// measures waiting for a CPU.
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(n), "cpu-ns/op")
}

// cpuTime is this process's user+system CPU time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
