package cli

import "barn.dev/lib/tool"

type stopCmd struct {
	jobsFlag
	Nodes []string `arg:"" optional:"" name:"node" predictor:"node" help:"Nodes to stop (default: all applied nodes)."`
}

func (c *stopCmd) Run(env *tool.Env) error {
	m, err := manager(env, true, false)
	if err != nil {
		return err
	}
	if err := c.setJobs(env, m); err != nil {
		return err
	}
	res, err := m.Stop(env.Ctx, c.Nodes)
	return emit(env, resultOrNil(res), err)
}
