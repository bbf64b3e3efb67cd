package cli_test

import (
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"barn.dev/lib/scripttest"
)

// Each test here is one behaviour Barn 1.x documents (see the README's
// plan section), proven by scripts of testdata/upstream on the fake QEMU
// and named after the behaviour. `make race` runs them under the race
// detector with TestScripts (they start, stop and lock nodes
// concurrently); the plain test pass skips them.

// upstream runs testdata/upstream/<name>.txtar for each name with p's
// settings.
func upstream(t *testing.T, p testscript.Params, names ...string) {
	p.Dir = ""
	for _, n := range names {
		p.Files = append(p.Files, "testdata/upstream/"+n+".txtar")
	}
	scripttest.Run(t, p)
}

// Barn 1.0: a whole-deployment recreate (no node names) whose inventory
// omits an applied node is refused, nodes_removed (exit 4), before anyone
// is asked or any VM stops; the scope is checked again under the
// destruction lock (deployment_changed); the confirmation lists every node
// being replaced.
func TestUpstream_WholeRecreateRefusesOmittedNodes(t *testing.T) {
	upstream(t, params(""), "recreate_whole_omitted_node_is_nodes_removed",
		"recreate_whole_deployment_changed_under_lock", "recreate_whole_confirmation_lists_every_node")
}

// Barn 0.9.3: recreate on selected nodes keeps the applied definitions of
// unselected peers, drifted or omitted (barn-node's half; the pipeline's,
// with plan, apply and resize, is testscripts' test of the same name).
func TestUpstream_SelectionKeepsUnselectedPeers(t *testing.T) {
	upstream(t, params(""), "recreate_selected_keeps_drifted_and_omitted_peers")
}

// Barn 1.0: destroying the control node promotes the first remaining
// node: ssh without a node reaches it, exec and provision go on (a real
// sshd; the pipeline's half is testscripts' test of the same name).
func TestUpstream_DestroyingTheControlNodePromotesTheFirstRemaining(t *testing.T) {
	upstream(t, accessParams(t, ""), "control_promotion")
}

// Barn 1.1/1.2: multi-node lifecycle commands show live progress tables on a
// terminal and one line per phase change on a pipe; --jobs and BARN_JOBS
// bound how many nodes are worked on at once (default 4, 1 to 16); nodes
// started at once never share a launch or a port.
func TestUpstream_ProgressAndConcurrency(t *testing.T) {
	upstream(t, params(""), "progress_terminal", "progress_jobs", "jobs_not_a_number", "concurrency")
}

// Barn 1.3: time status measures each guest's clock against the host's
// over the management SSH; time sync steps it back over the same
// connection; a start warns of a skewed clock (a real sshd, the guest's
// date faked).
func TestUpstream_TimeStatusAndSync(t *testing.T) {
	upstream(t, accessParams(t, ""), "time", "clock_start")
}

// Barn 0.9.3: a running VM launched without hot-plug headroom (before the
// policy) is resized by a stop/start, keeping its identity and disks
// (barn-node's half; the pipeline's is testscripts' test of the same name).
func TestUpstream_ResizeChangesVCPUsAndMemoryInPlace(t *testing.T) {
	upstream(t, params(""), "resize_no_headroom")
}

// Barn 1.2: resize --disk refuses, before anything stops, a root the
// guest cannot grow (not ext4 or XFS, LVM, another disk, not the last
// partition) and an overlay an interrupted resize left larger; every
// start that waits for readiness verifies that the guest grew its root
// partition and filesystem (root_not_grown; the guest's probe faked).
func TestUpstream_ResizeGrowsTheRootDiskOffline(t *testing.T) {
	upstream(t, params(""), "resize_root", "resize_crash_unverified")
}
