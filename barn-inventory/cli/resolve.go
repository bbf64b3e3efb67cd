package cli

import (
	"barn.dev/lib/inventory"
	"barn.dev/lib/tool"
)

type resolveCmd struct {
	fileFlag
}

func (c *resolveCmd) Run(env *tool.Env) error {
	in, err := c.read(env)
	if err != nil {
		return err
	}
	s, ws, err := inventory.ResolveInput(in)
	if err != nil {
		return err
	}
	warn(env, ws)
	return env.Emit(s)
}
