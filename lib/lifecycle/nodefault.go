package lifecycle

import (
	"context"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/state"
)

// Node faults: pause and resume (QMP stop / cont: a hung machine whose
// QEMU, sockets and network stay, so its peers see timeouts, not resets)
// and kill (SIGKILL to the proven QEMU: the guest ends as in a host crash).
// None changes the node's spec or disks; status shows a paused node's
// vm_status "paused" and a killed one as stopped (the audit proves it
// inactive and converges it, as after any QEMU that died).

// Pause halts the selected running nodes' vCPUs.
func (m *Manager) Pause(ctx context.Context, selectors []string) (*Result, error) {
	return m.nodeFault(ctx, "pause", selectors, func(n *state.Node) (string, error) {
		return "paused", m.VM.Control(ctx, n, "stop")
	})
}

// Resume continues the selected paused nodes (a running one stays running).
func (m *Manager) Resume(ctx context.Context, selectors []string) (*Result, error) {
	return m.nodeFault(ctx, "resume", selectors, func(n *state.Node) (string, error) {
		return "resumed", m.VM.Control(ctx, n, "cont")
	})
}

// Kill SIGKILLs the selected running nodes' QEMU through the proven process
// identity, then converges them to stopped from the evidence.
func (m *Manager) Kill(ctx context.Context, selectors []string) (*Result, error) {
	return m.nodeFault(ctx, "kill", selectors, func(n *state.Node) (string, error) {
		if err := m.VM.Kill(ctx, n); err != nil {
			return "", err
		}
		m.event("warn", n.Node, string(n.Phase), "QEMU killed (SIGKILL) by barn-node kill")
		obs := m.observe(ctx, n, true)
		if obs.Converged != "" {
			m.logf("%s", obs.Converged)
		}
		return "killed", obs.Err
	})
}

// nodeFault runs act on each selected node proven running, under the
// deployment lock.
func (m *Manager) nodeFault(ctx context.Context, verb string, selectors []string, act func(n *state.Node) (string, error)) (*Result, error) {
	lock, d, names, err := m.lockedSelection(ctx, selectors)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	res := m.newResult(verb)
	res.Generation = d.Generation
	m.runBatch(len(names), func(i int) {
		n, err := m.readCommitted(names[i])
		if err == nil && n == nil {
			err = exitcode.New(exitcode.Conflict, "node %s was never created", names[i]).WithReason("node_not_running").WithNext("barn-node start " + names[i])
		}
		if err != nil {
			res.fail(names[i], verb, err)
			return
		}
		obs := m.observe(ctx, n, true)
		switch {
		case obs.Err != nil:
			err = obs.Err
		case obs.Runtime != RuntimeRunning || n.Phase != state.Running:
			err = exitcode.New(exitcode.Conflict, "node %s is %s, not running", n.Node, n.Phase).WithReason("node_not_running").WithNext("barn-node start " + n.Node)
		}
		action := "none"
		if err == nil {
			action, err = act(n)
		}
		res.addNode(nodeResult(n, action))
		if err != nil {
			res.fail(n.Node, verb, err)
		}
	})
	res.sort()
	return res, res.Err(len(names))
}
