package cli

import "barn.dev/lib/tool"

type stopCmd struct {
	jobsFlag
	Nodes []string `arg:"" optional:"" name:"node" predictor:"node" help:"Nodes to stop (default: all applied nodes)."`
}

func (c *stopCmd) Run(env *tool.Env) error {
	jobs, err := c.jobs(env)
	if err != nil {
		return err
	}
	m, err := manager(env, true, false)
	if err != nil {
		return err
	}
	m.Concurrency = jobs
	res, err := m.Stop(env.Ctx, c.Nodes)
	return emit(env, resultOrNil(res), err)
}
