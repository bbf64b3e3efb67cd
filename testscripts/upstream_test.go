package testscripts

import (
	"testing"

	"barn.dev/lib/scripttest"
)

// Each test here is one behaviour Barn 1.x documents (see the README's
// plan section), proven by scripts of testdata/upstream on the fake QEMU
// and named after the behaviour. (barn-node's own halves, which need its
// test commands, are barn-node/cli's TestUpstream_ tests.)

// upstream runs testdata/upstream/<name>.txtar for each name on the fake
// QEMU.
func upstream(t *testing.T, names ...string) {
	p := pipelineParams("testdata/upstream")
	p.Dir = ""
	for _, n := range names {
		p.Files = append(p.Files, "testdata/upstream/"+n+".txtar")
	}
	scripttest.Run(t, p)
}

// Barn 0.9.3: resize applies vCPU and memory changes without a recreate:
// increases are hot-plugged when QEMU has headroom; decreases and other
// cases stop and start the node; identity, disks and SSH keys are kept;
// image, data disk layout, share and alias changes still need a recreate
// (plan outcome recreate; apply and resize refuse, naming the command).
func TestUpstream_ResizeChangesVCPUsAndMemoryInPlace(t *testing.T) { upstream(t, "resize") }

// Barn 0.9.3: plan, apply, resize and recreate on selected nodes keep the
// applied definitions of unselected peers, drifted or omitted; address,
// alias, control-node and deployment-wide conflicts are refused first.
func TestUpstream_SelectionKeepsUnselectedPeers(t *testing.T) { upstream(t, "select_peers") }

// Barn 0.9.3: an interrupted lifecycle operation is recoverable: killed
// after any durable step (create, stop, destroy, recreate, and resize,
// hot-plug or stop/start), the hints Barn prints, followed one by one,
// converge the lab.
func TestUpstream_InterruptedOperationsConvergeByTheirHints(t *testing.T) {
	upstream(t, "resize_crash", "crash_hints")
}

// Barn 1.1/1.2: --image, --arch, --cpu, --mem and --disk (BARN_* as
// defaults, a flag wins) apply to the selected nodes for one command; the
// applied spec records them, a later plan shows the drift, and the
// suggested commands (and refusals' hints) keep them and the selection;
// changing an existing node's image or the architecture needs a recreate.
func TestUpstream_PerCommandOverrides(t *testing.T) {
	upstream(t, "overrides", "hints_keep_overrides")
}

// Barn 1.1: the architecture aliases x86_64/x64 (amd64) and aarch64/a64
// (arm64) are read wherever an architecture is: vm_arch, --arch, BARN_ARCH.
func TestUpstream_ArchitectureAliases(t *testing.T) { upstream(t, "arch_aliases") }

// Barn 1.2: resize --disk grows the root disk offline and keeps the node's
// identity; a smaller root disk or a changed data disk is recreate. (Its
// interrupted growth resuming is InterruptedOperationsConvergeByTheirHints.)
func TestUpstream_ResizeGrowsTheRootDiskOffline(t *testing.T) { upstream(t, "resize_disk") }

// Barn 1.0: destroying the control node keeps the lab usable; the first
// remaining node becomes the control node, and the plan says that the
// inventory's control role and the applied one differ.
func TestUpstream_DestroyingTheControlNodePromotesTheFirstRemaining(t *testing.T) {
	upstream(t, "control_promotion")
}
