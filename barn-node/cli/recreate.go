package cli

import (
	"fmt"
	"strings"

	"barn.dev/lib/plan"
	"barn.dev/lib/tool"
)

type recreateCmd struct {
	Force  bool     `help:"Do not ask for confirmation (required without a controlling terminal, e.g. in scripts)."`
	NoWait bool     `short:"n" help:"Do not wait for guest readiness."`
	Nodes  []string `arg:"" name:"node" predictor:"node" help:"Nodes to recreate."`
}

func (c *recreateCmd) Run(env *tool.Env) error {
	var p plan.Plan
	if err := env.ReadDocument(env.In, "stdin", plan.Schema, &p); err != nil {
		return err
	}
	// The plan took stdin, so the person is asked on the controlling
	// terminal (as ssh and git ask for a password); with none, --force is
	// required (usage).
	if err := env.Confirm(c.Force, true, "recreate", fmt.Sprintf("Recreate %s: root and non-persistent disks are replaced; persistent disks are kept.", strings.Join(c.Nodes, ", "))); err != nil {
		return err
	}
	m, err := manager(env, true, true)
	if err != nil {
		return err
	}
	wait := bindReadiness(env, m, c.NoWait)
	res, err := m.Recreate(env.Ctx, &p, c.Nodes, wait)
	refreshFragment(env, res)
	return emit(env, resultOrNil(res), err)
}
