package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	node "barn.dev/barn-node/cli"
	"barn.dev/lib/fakeqemu"
	"barn.dev/lib/tool"
	"barn.dev/lib/wire"
)

// BenchmarkApplyPerNode measures barn-node apply's host-side overhead per
// node, excluding guest boot: journal, overlay (qemu-img), seed ISO,
// invocation, launch of the fake QEMU to QMP identity, state commit. The
// ms/node metric is wall time divided by the node count; nodes are
// prepared in parallel (bounded at 4). Target: < 150 ms/node.
func BenchmarkApplyPerNode(b *testing.B) {
	for _, nodes := range []int{1, 4, 8} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			benchApply(b, nodes)
		})
	}
}

func benchApply(b *testing.B, count int) {
	// BARN_BENCH_QEMU=/usr/bin/qemu-system-x86_64 measures real QEMU (TCG).
	bin := os.Getenv("BARN_BENCH_QEMU")
	if bin == "" {
		var err error
		if bin, err = fakeqemu.Install(b.TempDir()); err != nil {
			b.Fatal(err)
		}
	}
	rt, err := os.MkdirTemp("/tmp", "bb")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(rt)
	home := filepath.Join(b.TempDir(), ".barn")
	env := map[string]string{"BARN_HOME": home, "BARN_RUNTIME_DIR": rt, "BARN_QEMU": bin, "BARN_ACCEL": "tcg",
		"BARN_PRIVATE_NET": "none", "BARN_READINESS": "none", "BARN_STOP_TIMEOUT": "2s", "HOME": os.Getenv("HOME"), "PATH": os.Getenv("PATH")}
	getenv := func(k string) string { return env[k] }
	names := make([]string, count)
	for i := range names {
		names[i] = fmt.Sprintf("b%d", i+1)
	}
	run := func(stdin []byte, args ...string) {
		var out, errb bytes.Buffer
		code := node.Main(context.Background(), args, tool.Stdio{In: bytes.NewReader(stdin), Out: &out, Err: &errb}, getenv)
		if code != 0 {
			b.Fatalf("barn-node %v: exit %d\n%s\n%s", args, code, out.String(), errb.String())
		}
	}
	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		p, err := testPlan(getenv, names, planOptions{})
		if err != nil {
			b.Fatal(err)
		}
		doc, _ := wire.Marshal(p)
		b.StartTimer()
		start := time.Now()
		run(doc, "apply", "--no-wait")
		total += time.Since(start)
		b.StopTimer()
		run(nil, "destroy", "--force")
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N*count), "ms/node")
}
