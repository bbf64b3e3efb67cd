package state

import (
	"fmt"
	"io"
	"time"

	"barn.dev/lib/human"
)

// EventsText is the human view of event records (the --text form of
// `barn-state events` and `barn-node logs --source events`): one row per
// event, an aligned table (lib/human) of local time (RFC 3339, seconds),
// level, node, action (action/phase when a phase is set) and message.
// A followed log renders each event as it arrives, as a one-row table.
type EventsText []Event

// RenderText implements the --text view.
func (t EventsText) RenderText(w io.Writer) error {
	tw := human.Table(w)
	for _, e := range t {
		what := e.Action
		if e.Phase != "" {
			what += "/" + e.Phase
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Time.Local().Format(time.RFC3339), e.Level, e.Node, what, e.Message)
	}
	return tw.Flush()
}
