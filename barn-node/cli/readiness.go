package cli

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/guest"
	"barn.dev/lib/lifecycle"
	"barn.dev/lib/sshkeys"
	"barn.dev/lib/state"
	"barn.dev/lib/tool"
)

// readinessTimeout bounds one node's guest readiness wait unless
// BARN_READY_TIMEOUT sets another (a loaded host booting under TCG may
// need more: firmware, kernel and cloud-init all run emulated).
const readinessTimeout = 10 * time.Minute

// readiness binds guest.WaitReady: SSH over the management forward with the
// deployment key until the guest's ready marker matches this generation
// and node hash.
func readiness(env *tool.Env, m *lifecycle.Manager) lifecycle.Readiness {
	timeout, _ := durationEnv(env, envReadyTimeout, readinessTimeout) // refused by manager when bad
	return &guestReadiness{root: m.Root, timeout: timeout}
}

type guestReadiness struct {
	root    *state.Root
	timeout time.Duration
}

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
	r, err := guest.WaitReady(ctx, t, g.timeout)
	warnings := make([]lifecycle.Warning, 0, len(r.Warnings))
	for _, w := range r.Warnings {
		warnings = append(warnings, lifecycle.Warning{Stage: w.Stage, Detail: w.Detail})
	}
	return warnings, r.Repairs, err
}

// rootProbe binds lifecycle.RootProbe: `findmnt` in the guest over the
// management SSH connection, as barn-node exec runs it.
type rootProbe struct{ root *state.Root }

func (g *rootProbe) RootFS(ctx context.Context, n *state.Node) (lifecycle.RootFS, error) {
	d, err := g.root.ReadDeployment()
	if err != nil {
		return lifecycle.RootFS{}, err
	}
	if d == nil {
		return lifecycle.RootFS{}, exitcode.New(exitcode.Conflict, "no deployment is applied; cannot read the root filesystem of %s", n.Node).WithReason("no_deployment")
	}
	t := guest.Target{Node: n.Node, Port: n.SSHPort, User: d.Spec.Deployment.User.Name,
		Keys: sshkeys.Paths(g.root.KeysDir()), VMUUID: n.VMUUID, Generation: n.Generation, SpecHash: n.ReadyHash()}
	argv, err := guest.ExecArgv(t, []string{"findmnt", "-bnr", "-o", "SOURCE,FSTYPE,SIZE", "/"})
	if err != nil {
		return lifecycle.RootFS{}, err
	}
	var out, errOut bytes.Buffer
	code, err := guest.Run(ctx, argv, guest.Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
	if err != nil {
		return lifecycle.RootFS{}, err
	}
	f := strings.Fields(out.String())
	var size int64
	if code == 0 && len(f) == 3 {
		size, err = strconv.ParseInt(f[2], 10, 64)
	}
	if code != 0 || len(f) != 3 || err != nil {
		return lifecycle.RootFS{}, exitcode.New(exitcode.Runtime, "%s: reading the root filesystem (findmnt) failed: exit %d, output %q, %s", n.Node, code, out.String(), strings.TrimSpace(errOut.String())).
			WithReason("guest_probe_failed").WithNext("barn-node exec " + n.Node + " -- findmnt /")
	}
	return lifecycle.RootFS{Source: f[0], FSType: f[1], SizeBytes: size}, nil
}
