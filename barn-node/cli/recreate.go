package cli

import (
	"fmt"
	"strings"

	"barn.dev/lib/lifecycle"
	"barn.dev/lib/plan"
	"barn.dev/lib/tool"
)

type recreateCmd struct {
	jobsFlag
	Force  bool     `help:"Do not ask for confirmation (required without a controlling terminal, e.g. in scripts)."`
	NoWait bool     `short:"n" help:"Do not wait for guest readiness."`
	Nodes  []string `arg:"" optional:"" name:"node" predictor:"node" help:"Nodes to recreate; none means the whole deployment (refused when the plan omits an applied node)."`
}

func (c *recreateCmd) Run(env *tool.Env) error {
	jobs, err := c.jobs(env)
	if err != nil {
		return err
	}
	var p plan.Plan
	if err := env.ReadDocument(env.In, "stdin", plan.Schema, &p); err != nil {
		return err
	}
	// The scope is refused (nodes_removed) before anyone is asked; the
	// confirmation names every node being replaced. The plan took stdin,
	// so the person is asked on the controlling terminal (as ssh and git
	// ask for a password); with none, --force is required (usage).
	nodes := lifecycle.RecreateSelectors(&p, c.Nodes)
	scope, err := lifecycle.RecreateScope(&p, nodes)
	if err != nil {
		return err
	}
	what := "Recreate " + strings.Join(scope, ", ")
	if len(nodes) == 0 {
		what = fmt.Sprintf("Recreate the whole deployment, all %d nodes: %s", len(scope), strings.Join(scope, ", "))
	}
	if err := env.Confirm(c.Force, true, "recreate", what+": root and non-persistent disks are replaced; persistent disks are kept."); err != nil {
		return err
	}
	m, err := manager(env, true, true)
	if err != nil {
		return err
	}
	m.Concurrency = jobs
	wait := bindReadiness(env, m, c.NoWait)
	res, err := m.Recreate(env.Ctx, &p, nodes, wait)
	refreshFragment(env, res)
	return emit(env, resultOrNil(res), err)
}
