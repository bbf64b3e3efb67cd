package cli

import (
	"fmt"
	"strings"

	"barn.dev/lib/plan"
	"barn.dev/lib/tool"
)

type resizeCmd struct {
	jobsFlag
	Force  bool `help:"Do not ask for confirmation (required without a controlling terminal, e.g. in scripts)."`
	NoWait bool `short:"n" help:"Do not wait for guest readiness."`
	// Hotplug is the default since lab_resize proved it on a real guest
	// (lifecycle.Manager.Hotplug); --no-hotplug or BARN_HOTPLUG=0 opts out.
	Hotplug bool     `default:"true" negatable:"" env:"BARN_HOTPLUG" help:"Hot-plug vCPU and memory increases into running nodes with headroom instead of stopping and starting them (--no-hotplug or BARN_HOTPLUG=0: always stop and start)."`
	Nodes   []string `arg:"" optional:"" name:"node" predictor:"node" help:"Nodes to resize (default: every node the plan resizes)."`
}

func (c *resizeCmd) Run(env *tool.Env) error {
	jobs, err := c.jobs(env)
	if err != nil {
		return err
	}
	var p plan.Plan
	if err := env.ReadDocument(env.In, "stdin", plan.Schema, &p); err != nil {
		return err
	}
	names := c.Nodes
	if len(names) == 0 {
		for _, n := range p.Nodes {
			if n.Outcome == plan.Resize {
				names = append(names, n.Name)
			}
		}
	}
	// The plan took stdin, so the person is asked on the controlling
	// terminal; with none, --force is required (usage).
	if err := env.Confirm(c.Force, true, "resize", fmt.Sprintf("Resize %s: vCPU and memory increases within a running node's headroom are hot-plugged; anything else (a decrease, a larger root disk, no headroom) stops and starts the node. UUID, disks, keys and NVRAM are kept.", strings.Join(names, ", "))); err != nil {
		return err
	}
	m, err := manager(env, true, true)
	if err != nil {
		return err
	}
	m.Concurrency = jobs
	m.Hotplug = c.Hotplug
	wait := bindReadiness(env, m, c.NoWait)
	res, err := m.Resize(env.Ctx, &p, c.Nodes, wait)
	refreshFragment(env, res)
	return emit(env, resultOrNil(res), err)
}
