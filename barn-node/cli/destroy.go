package cli

import (
	"fmt"
	"strings"

	"barn.dev/lib/lifecycle"
	"barn.dev/lib/tool"
)

type destroyCmd struct {
	Force            bool     `help:"Do not ask for confirmation (required without a terminal)."`
	DeletePersistent bool     `help:"Also delete persistent disks, retained ones included (whole deployment only)."`
	Purge            bool     `help:"Also delete persistent disks, keys and deployment state (whole deployment only)."`
	Nodes            []string `arg:"" optional:"" name:"node" predictor:"node" help:"Nodes to destroy (default: the whole deployment)."`
}

func (c *destroyCmd) Run(env *tool.Env) error {
	what := "the whole deployment"
	if len(c.Nodes) > 0 {
		what = strings.Join(c.Nodes, ", ")
	}
	keep := "persistent disks, keys, images and the network are kept"
	switch {
	case c.Purge:
		keep = "persistent disks and keys are deleted too; images and the network are kept"
	case c.DeletePersistent:
		keep = "persistent disks are deleted too; keys, images and the network are kept"
	}
	if len(c.Nodes) == 0 || !(c.Purge || c.DeletePersistent) {
		if err := env.Confirm(c.Force, false, "destroy", fmt.Sprintf("Destroy %s (%s).", what, keep)); err != nil {
			return err
		}
	}
	m, err := manager(env, false, false)
	if err != nil {
		return err
	}
	res, err := m.Destroy(env.Ctx, c.Nodes, lifecycle.DestroyOptions{DeletePersistent: c.DeletePersistent, Purge: c.Purge})
	return emit(env, resultOrNil(res), err)
}

type purgeCmd struct{}

func (c *purgeCmd) Run(env *tool.Env) error {
	m, err := manager(env, false, false)
	if err != nil {
		return err
	}
	res, err := m.Purge(env.Ctx)
	return emit(env, resultOrNil(res), err)
}
