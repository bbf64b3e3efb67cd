package vm_test

import (
	"context"
	"testing"

	"barn.dev/lib/vm"
)

// BenchmarkLaunchFake measures host-side launch overhead: run the fake QEMU
// (-daemonize), wait for QMP identity, read the pidfile, capture and check
// the tuple. Each VM is quit (outside the timer) before the next launch.
func BenchmarkLaunchFake(b *testing.B) {
	f := newFixture(b, fakeBin)
	ctx := context.Background()
	o := vm.LaunchOptions{Env: fakeEnv("")}
	for b.Loop() {
		proc, err := vm.LaunchWith(ctx, f.inv, f.node, f.uuid, f.rt, o)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := vm.Stop(ctx, f.target(&proc), quick()); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
