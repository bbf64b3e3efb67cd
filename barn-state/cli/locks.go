package cli

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/state"
	"barn.dev/lib/tool"
)

// LocksCmd lists lock holders without waiting.
type LocksCmd struct{}

// LocksDoc is barn.state.locks/v1.
type LocksDoc struct {
	Schema string     `json:"schema"`
	Locks  []LockInfo `json:"locks"`
}

// LockInfo is one lock and its holder (null when free).
type LockInfo struct {
	Name    string            `json:"name"` // deployment, images, node/<node>
	Held    bool              `json:"held"`
	Holder  *state.LockHolder `json:"holder"`
	Problem string            `json:"problem,omitempty"` // an unreadable holder record
}

// RenderText implements tool.TextRenderer.
func (d LocksDoc) RenderText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LOCK\tHOLDER")
	for _, l := range d.Locks {
		switch {
		case l.Problem != "":
			fmt.Fprintf(tw, "%s\tunknown: %s\n", l.Name, l.Problem)
		case l.Holder != nil:
			fmt.Fprintf(tw, "%s\t%s (pid %d, since %s)\n", l.Name, l.Holder.Command, l.Holder.PID, l.Holder.Started.Local().Format(time.RFC3339))
		default:
			fmt.Fprintf(tw, "%s\tfree\n", l.Name)
		}
	}
	return tw.Flush()
}

// Run lists the locks.
func (c *LocksCmd) Run(env *tool.Env) error {
	r, err := inspect(env)
	if err != nil {
		return err
	}
	doc, err := listLocks(r)
	if err != nil {
		return err
	}
	return env.Emit(doc)
}

func listLocks(r *state.Root) (LocksDoc, error) {
	doc := LocksDoc{Schema: "barn.state.locks/v1", Locks: []LockInfo{}}
	names, err := r.LockNames()
	if err != nil {
		return doc, err
	}
	// Always list deployment and images, with the node locks between them:
	// the lock order.
	ordered := []string{state.LockDeploymentName, state.LockImagesName}
	for _, n := range names {
		if n != state.LockImagesName && n != state.LockDeploymentName {
			ordered = append(ordered, n)
		}
	}
	state.SortLockNames(ordered)
	for _, n := range ordered {
		info := LockInfo{Name: n}
		h, err := r.Holder(n)
		if err != nil {
			info.Problem = exitcode.As(err).Message
		} else if h != nil {
			info.Held, info.Holder = true, h
		}
		doc.Locks = append(doc.Locks, info)
	}
	return doc, nil
}
