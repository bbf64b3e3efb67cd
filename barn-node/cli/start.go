package cli

import (
	"context"

	"barn.dev/lib/lifecycle"
	"barn.dev/lib/tool"
)

type startCmd struct {
	jobsFlag
	NoWait bool     `short:"n" help:"Do not wait for guest readiness."`
	Nodes  []string `arg:"" optional:"" name:"node" predictor:"node" help:"Nodes (default: all applied nodes)."`
}

// restartCmd takes start's flags and arguments.
type restartCmd struct{ startCmd }

func (c *startCmd) Run(env *tool.Env) error { return c.run(env, (*lifecycle.Manager).Start) }

func (c *restartCmd) Run(env *tool.Env) error { return c.run(env, (*lifecycle.Manager).Restart) }

// run runs op (Manager.Start or Restart) on the nodes, waiting for guest
// readiness unless --no-wait, then refreshes the SSH fragment and warns
// of skewed guest clocks.
func (c *startCmd) run(env *tool.Env, op func(*lifecycle.Manager, context.Context, []string, bool) (*lifecycle.Result, error)) error {
	jobs, err := c.jobs(env)
	if err != nil {
		return err
	}
	m, err := manager(env, true, true)
	if err != nil {
		return err
	}
	m.Concurrency = jobs
	res, err := op(m, env.Ctx, c.Nodes, bindReadiness(env, m, c.NoWait))
	refreshFragment(env, res)
	warnSkew(env, res)
	return emit(env, resultOrNil(res), err)
}
