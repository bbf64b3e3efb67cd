package vm_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/imageref"
	"barn.dev/lib/internal/testport"
	"barn.dev/lib/qemu"
	"barn.dev/lib/qmp"
	"barn.dev/lib/spec"
	"barn.dev/lib/vm"
)

// withHeadroom rebuilds f's invocation with the headroom policy for a
// host of 4 CPUs and 8 GiB: -smp 1,maxcpus=4, -m 512,slots=8,maxmem=2048M.
func withHeadroom(t *testing.T, f *fixture) {
	t.Helper()
	inv, err := qemu.Invocation(qemu.Input{
		Node: spec.Node{Name: f.node, CPUs: 1, MemoryBytes: 512 << 20,
			MAC: spec.NICs{Management: "52:54:00:0a:0a:0b", Private: "52:54:00:0a:0a:0c"}},
		VMUUID: f.uuid, Image: imageref.Identity{Boot: "bios"},
		RootDisk: f.dir + "/root.qcow2", Base: f.dir + "/base.qcow2", Seed: f.dir + "/seed.iso", SSHPort: testport.Free(t), Runtime: f.rt,
		SerialLog: f.dir + "/serial.log", QEMULog: f.dir + "/qemu.log",
	}, qemu.Profile{Binary: f.inv.Binary, Accel: qemu.AccelTCG, Machine: "q35", CPU: "max", PrivateNet: qemu.PrivateNetNone,
		Host: qemu.HostSize{CPUs: 4, MemoryBytes: 8 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	if inv.Headroom == nil || inv.Headroom.MaxCPUs != 4 || inv.Headroom.MaxMemoryBytes != 2<<30 {
		t.Fatalf("headroom %+v", inv.Headroom)
	}
	f.inv = inv
}

// Hotplug on a QEMU started with headroom: vCPUs and memory grow in the
// same process, a repeat plugs nothing more, a decrease or a size beyond
// the headroom is hotplug_no_headroom before anything is plugged.
func testHotplug(t *testing.T, f *fixture) {
	withHeadroom(t, f)
	proc := launchReal(t, f)
	ctx := context.Background()
	var steps []string
	step := func(s string) { steps = append(steps, s) }
	if err := vm.Hotplug(ctx, f.target(&proc), 3, 1<<30, quick(), step); err != nil {
		t.Fatal(err)
	}
	want := []string{"cpu-plugged", "cpu-plugged", "memory-backend", "memory-plugged"}
	if len(steps) != len(want) {
		t.Fatalf("steps %v, want %v", steps, want)
	}
	var sum struct {
		Base    int64 `json:"base-memory"`
		Plugged int64 `json:"plugged-memory"`
	}
	m := qmp.Monitor{Socket: f.rt.BarnQMP}
	if err := m.Execute(ctx, "query-memory-size-summary", nil, &sum); err != nil || sum.Base+sum.Plugged != 1<<30 {
		t.Fatalf("memory %+v %v, want 1 GiB", sum, err)
	}
	var cpus []vm.HotplugCPU
	if err := m.Execute(ctx, "query-hotpluggable-cpus", nil, &cpus); err != nil {
		t.Fatal(err)
	}
	present := 0
	for _, c := range cpus {
		if c.QOMPath != "" {
			present++
		}
	}
	if len(cpus) != 4 || present != 3 {
		t.Fatalf("%d vCPU slots, %d present; want 4, 3", len(cpus), present)
	}
	steps = nil
	if err := vm.Hotplug(ctx, f.target(&proc), 3, 1<<30, quick(), step); err != nil || len(steps) != 0 {
		t.Fatalf("repeat: %v, steps %v", err, steps)
	}
	for _, c := range []struct {
		cpus int
		mem  int64
	}{{2, 1 << 30}, {3, 512 << 20}, {5, 1 << 30}} {
		err := vm.Hotplug(ctx, f.target(&proc), c.cpus, c.mem, quick(), step)
		if e := exitcode.As(err); e == nil || e.Reason != "hotplug_no_headroom" || len(steps) != 0 {
			t.Errorf("%d vCPUs, %d bytes: %v (steps %v), want hotplug_no_headroom", c.cpus, c.mem, err, steps)
		}
	}
	// Beyond maxmem: QEMU itself refuses.
	if err := vm.Hotplug(ctx, f.target(&proc), 3, 3<<30, quick(), step); exitcode.As(err) == nil || exitcode.As(err).Reason != "hotplug_refused" {
		t.Errorf("beyond maxmem: %v, want hotplug_refused", err)
	}
}

func TestHotplugFake(t *testing.T) { testHotplug(t, newFixture(t, fakeBin)) }

// A QEMU that dies at a vCPU device_add leaves Barn's session without a
// reply: Hotplug says the process exited (hotplug_qemu_exited), not that
// QMP is merely unavailable, so the failure is not read as a busy or
// refusing monitor; it quotes QEMU's last words from its -D log.
func TestHotplugQEMUExits(t *testing.T) {
	f := newFixture(t, fakeBin)
	withHeadroom(t, f)
	proc := f.launch(t, "crash-at-cpu-plug")
	err := vm.Hotplug(context.Background(), f.target(&proc), 2, 512<<20, quick(), nil)
	if e := exitcode.As(err); e == nil || e.Reason != "hotplug_qemu_exited" || e.Class != exitcode.Runtime || !errors.Is(err, qmp.ErrUnavailable) {
		t.Fatalf("QEMU dying at device_add: %v, want runtime hotplug_qemu_exited wrapping QMP unavailable", err)
	}
	if want := "its log " + f.dir + "/qemu.log ends: qemu-system-x86_64: fake: aborting at device_add barn-cpu-s001"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not quote QEMU's log: want %q", err, want)
	}
	if e := exitcode.As(err); !strings.Contains(e.Next, "barn-node logs --source qemu "+f.node) {
		t.Errorf("next %q does not point at QEMU's log", e.Next)
	}
}

// TestRealQEMUHotplug is the same contract on the real QEMU. Hot-plug is
// experimental and opt-in (barn-node resize --hotplug). In one race pass
// of `make ci` the vCPU device_add here went unanswered within quick()'s
// 500 ms QMP timeout, which then bounded the whole session (identity,
// queries and every device_add); it now bounds each reply (lib/qmp), and
// the failure has not come back. The live lab_resize's lost connection is
// still unexplained, so this runs with the unproven lab sections
// (`make e2e-next`, BARN_TEST_NEXT=1) rather than as a gate of `make ci`.
func TestRealQEMUHotplug(t *testing.T) {
	if os.Getenv("BARN_TEST_NEXT") != "1" {
		t.Skip("experimental hot-plug on real QEMU: run with BARN_TEST_NEXT=1 (make e2e-next); see README, resize")
	}
	testHotplug(t, realQEMU(t))
}
