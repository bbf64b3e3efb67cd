package cli

import "barn.dev/lib/tool"

type statusCmd struct {
	Nodes []string `arg:"" optional:"" name:"node" predictor:"node" help:"Nodes to show (default: all)."`
}

func (c *statusCmd) Run(env *tool.Env) error {
	m, err := manager(env, false, false)
	if err != nil {
		return err
	}
	st, err := m.Status(env.Ctx, c.Nodes)
	if st == nil {
		return err
	}
	return emit(env, st, err)
}
