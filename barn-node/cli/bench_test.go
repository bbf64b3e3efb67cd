package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	node "barn.dev/barn-node/cli"
	"barn.dev/lib/fakeqemu"
	"barn.dev/lib/imagecache"
	"barn.dev/lib/imageref"
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

// BenchmarkStartPerNode measures `barn-node start --no-wait` of stopped
// nodes on the fake QEMU, the base image's re-verification included
// (size, SHA-256 and qcow2 header on every start; once per command for a
// base the started nodes share). The tiny base (a 16 MiB sparse qcow2)
// shows the start without hashing cost; the large one (BARN_BENCH_BYTES,
// default 1 GiB, fully allocated) what re-verification adds per start.
// ms/start is the start's wall time divided by the node count; the stop
// between iterations is not timed.
func BenchmarkStartPerNode(b *testing.B) {
	big := int64(1 << 30)
	if v, err := strconv.ParseInt(os.Getenv("BARN_BENCH_BYTES"), 10, 64); err == nil && v > 0 {
		big = v
	}
	for _, c := range []struct {
		name  string
		bytes int64
		nodes int
	}{{"base=tiny/nodes=1", 0, 1}, {"base=large/nodes=1", big, 1}, {"base=large/nodes=4", big, 4}} {
		b.Run(c.name, func(b *testing.B) { benchStart(b, c.bytes, c.nodes) })
	}
}

func benchStart(b *testing.B, baseBytes int64, count int) {
	bin, err := fakeqemu.Install(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	rt, err := os.MkdirTemp("/tmp", "bs")
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
		names[i] = fmt.Sprintf("s%d", i+1)
	}
	run := func(stdin []byte, args ...string) {
		var out, errb bytes.Buffer
		code := node.Main(context.Background(), args, tool.Stdio{In: bytes.NewReader(stdin), Out: &out, Err: &errb}, getenv)
		if code != 0 {
			b.Fatalf("barn-node %v: exit %d\n%s\n%s", args, code, out.String(), errb.String())
		}
	}
	p, err := testPlan(getenv, names, planOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if baseBytes > 0 {
		id, err := largeBase(home, baseBytes)
		if err != nil {
			b.Fatal(err)
		}
		p.Images = []imageref.Identity{id}
		for i := range p.Nodes {
			p.Nodes[i].Image = &id
		}
	}
	doc, _ := wire.Marshal(p)
	run(doc, "apply", "--no-wait")
	defer run(nil, "destroy", "--force")
	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		run(nil, "stop")
		b.StartTimer()
		start := time.Now()
		run(nil, "start", "--no-wait")
		total += time.Since(start)
	}
	b.StopTimer()
	b.ReportMetric(float64(total.Microseconds())/1e3/float64(b.N*count), "ms/start")
}

// largeBase writes a fully allocated qcow2 of about size bytes into the
// cache (images/t1/t1-large-amd64.qcow2, read-only) and returns its exact
// identity.
func largeBase(home string, size int64) (imageref.Identity, error) {
	p := filepath.Join(home, "images", "t1", "t1-large-amd64.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "-o", "preallocation=full", p, strconv.FormatInt(size, 10)).CombinedOutput(); err != nil {
		return imageref.Identity{}, fmt.Errorf("qemu-img: %v: %s", err, out)
	}
	if err := os.Chmod(p, 0o444); err != nil {
		return imageref.Identity{}, err
	}
	m, err := imagecache.MeasureFile(p)
	if err != nil {
		return imageref.Identity{}, err
	}
	return imageref.Identity{Selector: "t1", Image: "t1", Version: "1", Arch: "amd64", File: "images/t1-large-amd64.qcow2",
		SHA256: m.SHA256, SizeBytes: m.SizeBytes, VirtualSize: m.Header.VirtualSize, Boot: "bios", SourceUser: "debian", Status: "supported"}, nil
}

// BenchmarkNoopApply3 measures `barn-node apply --no-wait` of a plan that
// changes nothing, against a running 3-node lab on the fake QEMU: the
// cost of converging an up-to-date lab (locks, state reads, each running
// VM's identity proven over QMP). The plan is computed against the
// applied state once; ms/apply is the median apply's wall time. Target:
// < 50 ms.
func BenchmarkNoopApply3(b *testing.B) {
	bin, err := fakeqemu.Install(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	rt, err := os.MkdirTemp("/tmp", "bn")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(rt)
	home := filepath.Join(b.TempDir(), ".barn")
	env := map[string]string{"BARN_HOME": home, "BARN_RUNTIME_DIR": rt, "BARN_QEMU": bin, "BARN_ACCEL": "tcg",
		"BARN_PRIVATE_NET": "none", "BARN_READINESS": "none", "BARN_STOP_TIMEOUT": "2s", "HOME": os.Getenv("HOME"), "PATH": os.Getenv("PATH")}
	getenv := func(k string) string { return env[k] }
	names := []string{"n1", "n2", "n3"}
	run := func(stdin []byte, args ...string) string {
		var out, errb bytes.Buffer
		code := node.Main(context.Background(), args, tool.Stdio{In: bytes.NewReader(stdin), Out: &out, Err: &errb}, getenv)
		if code != 0 {
			b.Fatalf("barn-node %v: exit %d\n%s\n%s", args, code, out.String(), errb.String())
		}
		return out.String()
	}
	plan := func() []byte {
		p, err := testPlan(getenv, names, planOptions{})
		if err != nil {
			b.Fatal(err)
		}
		doc, _ := wire.Marshal(p)
		return doc
	}
	run(plan(), "apply", "--no-wait")
	defer run(nil, "destroy", "--force")
	noop := plan()
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		run(noop, "apply", "--no-wait")
		times = append(times, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1e3, "ms/apply")
}
