package cli

import (
	"context"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/guest"
	"barn.dev/lib/lifecycle"
	"barn.dev/lib/sshkeys"
	"barn.dev/lib/state"
	"barn.dev/lib/tool"
)

// readinessTimeout bounds one node's guest readiness wait.
const readinessTimeout = 10 * time.Minute

// readiness binds guest.WaitReady: SSH over the management forward with the
// deployment key until the guest's ready marker matches this generation
// and node hash.
func readiness(env *tool.Env, m *lifecycle.Manager) lifecycle.Readiness {
	return &guestReadiness{root: m.Root}
}

type guestReadiness struct{ root *state.Root }

func (g *guestReadiness) WaitReady(ctx context.Context, n *state.Node) ([]lifecycle.Warning, []string, error) {
	d, err := g.root.ReadDeployment()
	if err != nil {
		return nil, nil, err
	}
	if d == nil {
		return nil, nil, exitcode.New(exitcode.Conflict, "no deployment is applied; cannot check readiness of %s", n.Node)
	}
	t := guest.Target{Node: n.Node, Port: n.SSHPort, User: d.Spec.Deployment.User.Name,
		Keys: sshkeys.Paths(g.root.KeysDir()), VMUUID: n.VMUUID, Generation: n.Generation, SpecHash: n.ReadyHash()}
	r, err := guest.WaitReady(ctx, t, readinessTimeout)
	warnings := make([]lifecycle.Warning, 0, len(r.Warnings))
	for _, w := range r.Warnings {
		warnings = append(warnings, lifecycle.Warning{Stage: w.Stage, Detail: w.Detail})
	}
	return warnings, r.Repairs, err
}
