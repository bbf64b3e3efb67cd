package testscripts

import (
	"testing"

	"barn.dev/lib/scripttest"
)

// Each test here is one behaviour Barn 1.x documents (see the README's
// plan section), proven by one script of testdata/upstream on the fake
// QEMU and named after the behaviour.

// upstream runs testdata/upstream/<name>.txtar on the fake QEMU.
func upstream(t *testing.T, name string) {
	p := pipelineParams("testdata/upstream")
	p.Dir = ""
	p.Files = []string{"testdata/upstream/" + name + ".txtar"}
	scripttest.Run(t, p)
}

// Barn 0.9.3: plan, apply, resize and recreate on selected nodes keep the
// applied definitions of unselected peers, drifted or omitted; address,
// alias, control-node and deployment-wide conflicts are refused first.
func TestUpstream_SelectionKeepsUnselectedPeers(t *testing.T) { upstream(t, "select_peers") }

// Barn 1.1/1.2: --image, --arch, --cpu, --mem and --disk (BARN_* as
// defaults, a flag wins) apply to the selected nodes for one command; the
// applied spec records them, a later plan shows the drift, and the
// suggested commands keep them. Architecture aliases x86_64/x64 and
// aarch64/a64 are read wherever an architecture is.
func TestUpstream_PerCommandOverrides(t *testing.T) { upstream(t, "overrides") }

// Barn 1.0: destroying the control node keeps the lab usable; the first
// remaining node becomes the control node, and the plan says that the
// inventory's control role and the applied one differ.
func TestUpstream_DestroyingTheControlNodePromotesTheFirstRemaining(t *testing.T) {
	upstream(t, "control_promotion")
}
