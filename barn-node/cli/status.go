package cli

import (
	"time"

	"barn.dev/lib/tool"
)

type statusCmd struct {
	Watch    bool          `short:"w" help:"Refresh until every selected node is ready, failed or not running (for a slow first boot); progress on stderr."`
	Timeout  time.Duration `default:"15m" help:"With --watch: give up after this long (exit 1, reason watch_timeout)."`
	Interval time.Duration `default:"2s" hidden:"" help:"With --watch: time between refreshes."`
	Nodes    []string      `arg:"" optional:"" name:"node" predictor:"node" help:"Nodes to show (default: all)."`
}

func (c *statusCmd) Run(env *tool.Env) error {
	m, err := manager(env, false, false)
	if err != nil {
		return err
	}
	if c.Watch {
		return c.watch(env, m)
	}
	st, err := m.Status(env.Ctx, c.Nodes)
	if st == nil {
		return err
	}
	return emit(env, st, err)
}
