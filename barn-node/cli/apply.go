package cli

import (
	"barn.dev/lib/lifecycle"
	"barn.dev/lib/plan"
	"barn.dev/lib/tool"
)

type applyCmd struct {
	jobsFlag
	NoWait   bool     `short:"n" help:"Do not wait for guest readiness."`
	Rollback bool     `help:"Remove the artifacts of nodes that fail to prepare in this run."`
	Nodes    []string `arg:"" optional:"" name:"node" predictor:"node" help:"Apply only these nodes of the plan; every other node keeps its applied definition (default: every node of the plan)."`
}

func (c *applyCmd) Run(env *tool.Env) error {
	jobs, err := c.jobs(env)
	if err != nil {
		return err
	}
	var p plan.Plan
	if err := env.ReadDocument(env.In, "stdin", plan.Schema, &p); err != nil {
		return err
	}
	m, err := manager(env, true, true)
	if err != nil {
		return err
	}
	m.Concurrency = jobs
	wait := bindReadiness(env, m, c.NoWait)
	res, err := m.Apply(env.Ctx, &p, lifecycle.ApplyOptions{NoWait: !wait, Rollback: c.Rollback, Nodes: c.Nodes})
	warnSkew(env, res)
	return emit(env, resultOrNil(res), err)
}
