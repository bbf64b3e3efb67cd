package lifecycle

import (
	"context"
	"sort"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/state"
)

// selectNodes resolves selectors against the applied deployment: none means
// every applied node; an unknown name is a usage error naming it.
func (m *Manager) selectNodes(d *state.Deployment, selectors []string) ([]string, error) {
	if d == nil {
		return nil, exitcode.New(exitcode.Conflict, "no deployment is applied").WithReason("no_deployment").WithNext(applyAgain("", nil))
	}
	if len(selectors) == 0 {
		names := d.Spec.NodeNames()
		sort.Strings(names)
		return names, nil
	}
	seen := map[string]bool{}
	var out []string
	for _, s := range selectors {
		if d.Spec.Node(s) == nil {
			return nil, exitcode.New(exitcode.Usage, "unknown node %q; applied nodes: %v", s, d.Spec.NodeNames()).WithReason("unknown_node")
		}
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out, nil
}

// lockedSelection takes the deployment lock (waiting, as every modifying
// command does), reads the applied deployment, resolves selectors (all
// applied nodes when none) and takes those nodes' locks. The caller must
// Unlock on success.
func (m *Manager) lockedSelection(ctx context.Context, selectors []string) (state.Lock, *state.Deployment, []string, error) {
	lock, err := m.Root.LockDeployment(ctx, m.Command, true, m.Waiting)
	if err != nil {
		return nil, nil, nil, err
	}
	d, err := m.Root.ReadDeployment()
	if err == nil {
		var names []string
		if names, err = m.selectNodes(d, selectors); err == nil {
			if lock, err = m.Root.WithNodeLocks(ctx, lock, m.Command, true, names); err != nil {
				return nil, nil, nil, err // WithNodeLocks released the deployment lock
			}
			return lock, d, names, nil
		}
	}
	_ = lock.Unlock()
	return nil, nil, nil, err
}

// readCommitted returns node's committed state (nil when never created)
// after reading all of its documents: a damaged journal or transaction
// record beside the state is the integrity error (7) naming it, so no
// command acts on a node whose evidence it cannot read.
func (m *Manager) readCommitted(name string) (*state.Node, error) {
	docs, err := m.Root.ReadNodeDocuments(name)
	if err != nil {
		return nil, err
	}
	return docs.State, nil
}

// Start starts the selected stopped nodes from applied state (all when
// none are named) and leaves running ones running. It reads no plan and
// creates nothing; a node without committed state fails.
func (m *Manager) Start(ctx context.Context, selectors []string, wait bool) (*Result, error) {
	lock, d, names, err := m.lockedSelection(ctx, selectors)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	alloc, err := m.newPortAllocator()
	if err != nil {
		return nil, err
	}
	res := m.newResult("start")
	res.Generation = d.Generation
	m.startBatch(ctx, names, alloc, wait, res)
	res.sort()
	return res, res.Err(len(names))
}

// Stop stops the selected running nodes (all when none are named) through
// the verified stop ladder, bounded in parallel.
func (m *Manager) Stop(ctx context.Context, selectors []string) (*Result, error) {
	lock, d, names, err := m.lockedSelection(ctx, selectors)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	res := m.newResult("stop")
	res.Generation = d.Generation
	m.stopBatch(ctx, names, res)
	res.sort()
	return res, res.Err(len(names))
}

func (m *Manager) stopBatch(ctx context.Context, names []string, res *Result) {
	m.runBatch(len(names), func(i int) {
		name := names[i]
		n, err := m.readCommitted(name)
		if err != nil {
			res.fail(name, "stop", err)
			return
		}
		if n == nil {
			return // applied but never created: nothing runs
		}
		obs := m.observe(ctx, n, true)
		if obs.Converged != "" {
			m.logf("%s", obs.Converged)
		}
		if n.Phase == state.Destroying {
			res.addNode(nodeResult(n, "none"))
			res.fail(name, "stop", exitcode.New(exitcode.Conflict, "node %s is being destroyed", name).
				WithReason("interrupted_transition").WithNext("barn-node destroy "+name+" --force"))
			return
		}
		if obs.Err != nil && exitcode.ClassOf(obs.Err) == exitcode.Integrity {
			res.addNode(nodeResult(n, "none"))
			res.fail(name, "stop", obs.Err)
			return
		}
		action := "stopped"
		if n.Phase == state.Stopped {
			action = "already-stopped"
		}
		if err := m.stop(ctx, n); err != nil {
			res.addNode(nodeResult(n, "none"))
			res.fail(name, "stop", err)
			return
		}
		res.addNode(nodeResult(n, action))
	})
}

// Restart stops then starts the selected nodes.
func (m *Manager) Restart(ctx context.Context, selectors []string, wait bool) (*Result, error) {
	lock, d, names, err := m.lockedSelection(ctx, selectors)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	// What a start needs is proven before stopping (restartable): a node
	// that could not start again is left as it is and fails.
	res := m.newResult("restart")
	res.Generation = d.Generation
	var stoppable []string
	for _, name := range names {
		n, err := m.readCommitted(name)
		if err != nil {
			res.fail(name, "stop", err)
			continue
		}
		if n != nil {
			if err := m.restartable(ctx, n); err != nil {
				res.addNode(nodeResult(n, "none"))
				res.fail(name, "start", err)
				continue
			}
		}
		stoppable = append(stoppable, name)
	}
	stopped := m.newResult("restart")
	m.stopBatch(ctx, stoppable, stopped)
	failed := map[string]bool{}
	for _, f := range stopped.Failures {
		failed[f.Node] = true
		res.Failures = append(res.Failures, f)
	}
	var again []string
	for _, n := range stoppable {
		if !failed[n] {
			again = append(again, n)
		}
	}
	alloc, err := m.newPortAllocator()
	if err != nil {
		return nil, err
	}
	m.startBatch(ctx, again, alloc, wait, res)
	for i := range res.Nodes {
		if res.Nodes[i].Action == "started" {
			res.Nodes[i].Action = "restarted"
		}
	}
	res.sort()
	return res, res.Err(len(names))
}
