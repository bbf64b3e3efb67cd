package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"barn.dev/lib/catalog"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/imageref"
	"barn.dev/lib/plan"
	"barn.dev/lib/qemu"
	"barn.dev/lib/state"
	"barn.dev/lib/tool"
	"barn.dev/lib/vm"
)

// readApplied reads the applied deployment and every node's documents
// (state, journal, transaction). A node directory without state.json holds
// no committed node (an uncommitted create, which apply rolls back); any
// damaged document, committed or in flight, is the integrity error
// lib/state returns, naming the file.
func readApplied(root *state.Root) (*state.Deployment, map[string]*state.Node, error) {
	applied, err := root.ReadDeployment()
	if err != nil {
		return nil, nil, err
	}
	names, err := root.NodeNames()
	if err != nil {
		return nil, nil, err
	}
	nodes := make(map[string]*state.Node, len(names))
	for _, name := range names {
		docs, err := root.ReadNodeDocuments(name)
		if err != nil {
			return nil, nil, err
		}
		if docs.State != nil {
			nodes[name] = docs.State
		}
	}
	return applied, nodes, nil
}

// lockNote reports a busy deployment lock without waiting for it: reads
// are atomic, so the plan is still consistent, but it may soon be stale.
func lockNote(root *state.Root) string {
	h, err := root.Holder(state.LockDeploymentName)
	if err != nil {
		return fmt.Sprintf("the deployment lock record is unreadable (%v); planned from the committed state without waiting", err)
	}
	if h == nil {
		return ""
	}
	return fmt.Sprintf("the deployment is busy: %s (pid %d, since %s) holds its lock; planned from the last committed state, which it may be changing",
		h.Command, h.PID, h.Started.UTC().Format(time.RFC3339))
}

// imageResolver is the one place barn-plan reaches the image catalog: the
// active catalog of the repository selected by --repo, BARN_REPO or the
// official repository (whose embedded catalog is active out of the box)
// resolves each selector, including the empty one of a node without
// vm_image, to an exact identity. A selected repository without an active
// catalog, or a damaged catalog, is the error lib/catalog returns.
func imageResolver(env *tool.Env, root *state.Root, repo string) (imageref.Resolver, error) {
	if repo != "" && !strings.Contains(repo, "://") && !filepath.IsAbs(repo) {
		abs, err := filepath.Abs(repo)
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Usage, err, "--repo %s", repo)
		}
		repo = abs
	}
	c, err := catalog.LoadSelected(root, repo, env.Getenv("BARN_REPO"))
	if err != nil {
		return nil, err
	}
	return c, nil
}

// runtimeProfile is the runtime barn-node would select now (accelerator
// from BARN_ACCEL and /dev/kvm, host architecture), for runtime drift.
// Planning needs no QEMU binary, so only the accelerator decision is used.
// When no accelerator is usable the runtime is unknown: no runtime drift
// is claimed, and a warning says why apply would refuse.
func runtimeProfile(env *tool.Env) (*plan.RuntimeProfile, *plan.Warning) {
	anyBinary := func(name string) (string, error) { return name, nil }
	prof, err := qemu.DetectProfile(env.Getenv, anyBinary)
	if err != nil {
		return nil, &plan.Warning{Code: "runtime_unknown",
			Message: "runtime drift not checked: " + err.Error()}
	}
	return &plan.RuntimeProfile{Accel: prof.Accel, Arch: catalog.NativeArch()}, nil
}

// auditParallel bounds concurrent liveness audits.
const auditParallel = 8

// audit is the read-only liveness check of one committed node: QMP
// identity plus the recorded process tuple (lib/vm). Tests may replace it.
var audit = func(ctx context.Context, n *state.Node) bool {
	return vm.Audit(ctx, vm.Target{Node: n.Node, UUID: n.VMUUID, Runtime: n.Runtime, Invocation: n.Invocation, Process: n.Process}).Running
}

// liveness audits every committed node up front, in parallel (each audit
// waits at most a few seconds for QMP), and returns the lookup planning
// uses.
func liveness(env *tool.Env, nodes map[string]*state.Node) func(*state.Node) bool {
	alive := make(map[string]bool, len(nodes))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, auditParallel)
	for name, n := range nodes {
		if n.Phase == state.Absent {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			ok := audit(env.Ctx, n)
			mu.Lock()
			alive[name] = ok
			mu.Unlock()
		}()
	}
	wg.Wait()
	return func(n *state.Node) bool { return alive[n.Node] }
}
