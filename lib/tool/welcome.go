package tool

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WelcomeSchema is the schema of a bare invocation's document.
const WelcomeSchema = "barn.welcome/v1"

// Welcome is what a tool prints when it is run with no arguments: what it
// is for, what it sees now, and the commands that make sense next (as Barn
// 0.9's bare `barn` does). It exits 0.
type Welcome struct {
	Schema  string   `json:"schema"`
	Tool    string   `json:"tool"`
	Summary string   `json:"summary"`
	State   string   `json:"state,omitempty"` // one line about the world now, e.g. "no deployment under ~/.barn"
	Actions []Action `json:"actions"`
	// Err, when set, is reported instead of the greeting (with its exit
	// class): damaged state is never summarised as if it were absent.
	Err error `json:"-"`
}

// Action is one suggested next command.
type Action struct {
	Command string `json:"command"`
	Why     string `json:"why"`
}

// Welcomer is implemented by a grammar that greets a bare invocation. It
// returns nil when the invocation is not bare after all (barn-plan with a
// spec on stdin), and Main then parses as usual.
type Welcomer interface {
	Welcome(env *Env) *Welcome
}

// RenderText implements TextRenderer: the summary, the state, then the
// actions as an aligned table.
func (w Welcome) RenderText(out io.Writer) error {
	fmt.Fprintf(out, "%s: %s\n", w.Tool, w.Summary)
	if w.State != "" {
		fmt.Fprintf(out, "now: %s\n", w.State)
	}
	fmt.Fprintln(out, "\nnext:")
	tw := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	for _, a := range w.Actions {
		fmt.Fprintf(tw, "  %s\t%s\n", a.Command, a.Why)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(out, "\nevery command: %s --help\n", w.Tool)
	return err
}
