package cli

import (
	"fmt"
	"io"
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

// eventView adds a --text rendering to an event.
type eventView struct{ state.Event }

// RenderText implements tool.TextRenderer.
func (e eventView) RenderText(w io.Writer) error {
	_, err := fmt.Fprintf(w, "%s %-5s %s %s/%s: %s\n", e.Time.Local().Format(time.RFC3339), e.Level, e.Node, e.Action, e.Phase, e.Message)
	return err
}

// followInterval is how often --follow polls the log.
const followInterval = 200 * time.Millisecond

// Run prints each matching event as one JSON line (NDJSON), oldest first.
func (c *EventsCmd) Run(env *tool.Env) error {
	if c.Node != "" && c.Node != state.DeploymentEventNode && !state.ValidNodeName(c.Node) {
		return exitcode.New(exitcode.Usage, "--node %q is not a valid node name", c.Node)
	}
	r, err := inspect(env)
	if err != nil {
		return err
	}
	filter := state.EventFilter{Node: c.Node}
	emit := func(e state.Event) error { return env.Emit(eventView{e}) }
	if c.Follow {
		return r.FollowEvents(env.Ctx, filter, followInterval, emit)
	}
	events, err := r.ReadEvents(filter)
	if err != nil {
		return err
	}
	for _, e := range events {
		if err := emit(e); err != nil {
			return err
		}
	}
	return nil
}
