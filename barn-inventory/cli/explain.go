package cli

import (
	"barn.dev/lib/inventory"
	"barn.dev/lib/tool"
)

type explainCmd struct {
	fileFlag
	Node string `arg:"" predictor:"node" help:"Node name or host address."`
}

func (c *explainCmd) Run(env *tool.Env) error {
	in, err := c.read(env)
	if err != nil {
		return err
	}
	e, err := inventory.ExplainInput(in, c.Node)
	if err != nil {
		return err
	}
	return env.Emit(e)
}
