package cli

import (
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/state"
	"barn.dev/lib/tool"
)

// EventsCmd prints the event log.
type EventsCmd struct {
	Follow bool   `short:"f" help:"Keep printing new events until interrupted."`
	Node   string `placeholder:"NODE" help:"Only events of this node (or \"deployment\")."`
}

// followInterval is how often --follow polls the log.
const followInterval = 200 * time.Millisecond

// Run prints each matching event as one JSON line (NDJSON), oldest first;
// the text view is one aligned table (state.EventsText), and a followed
// event is printed as it arrives.
func (c *EventsCmd) Run(env *tool.Env) error {
	if c.Node != "" && c.Node != state.DeploymentEventNode && !state.ValidNodeName(c.Node) {
		return exitcode.New(exitcode.Usage, "--node %q is not a valid node name", c.Node)
	}
	r, err := inspect(env)
	if err != nil {
		return err
	}
	filter := state.EventFilter{Node: c.Node}
	emit := func(e state.Event) error {
		if env.Output.Text {
			return env.Emit(state.EventsText{e})
		}
		return env.Emit(e)
	}
	if c.Follow {
		return r.FollowEvents(env.Ctx, filter, followInterval, emit)
	}
	events, err := r.ReadEvents(filter)
	if err != nil {
		return err
	}
	if env.Output.Text {
		return env.Emit(state.EventsText(events))
	}
	for _, e := range events {
		if err := emit(e); err != nil {
			return err
		}
	}
	return nil
}
