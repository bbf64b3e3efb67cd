package cli

import "barn.dev/lib/tool"

type startCmd struct {
	jobsFlag
	NoWait bool     `short:"n" help:"Do not wait for guest readiness."`
	Nodes  []string `arg:"" optional:"" name:"node" predictor:"node" help:"Nodes to start (default: all applied nodes)."`
}

func (c *startCmd) Run(env *tool.Env) error {
	m, err := manager(env, true, true)
	if err != nil {
		return err
	}
	if err := c.setJobs(env, m); err != nil {
		return err
	}
	wait := bindReadiness(env, m, c.NoWait)
	res, err := m.Start(env.Ctx, c.Nodes, wait)
	refreshFragment(env, res)
	warnSkew(env, res)
	return emit(env, resultOrNil(res), err)
}

type restartCmd struct {
	jobsFlag
	NoWait bool     `short:"n" help:"Do not wait for guest readiness."`
	Nodes  []string `arg:"" optional:"" name:"node" predictor:"node" help:"Nodes to restart (default: all applied nodes)."`
}

func (c *restartCmd) Run(env *tool.Env) error {
	m, err := manager(env, true, true)
	if err != nil {
		return err
	}
	if err := c.setJobs(env, m); err != nil {
		return err
	}
	wait := bindReadiness(env, m, c.NoWait)
	res, err := m.Restart(env.Ctx, c.Nodes, wait)
	refreshFragment(env, res)
	warnSkew(env, res)
	return emit(env, resultOrNil(res), err)
}
