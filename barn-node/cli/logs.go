package cli

import (
	"bufio"
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/state"
	"barn.dev/lib/tool"
	"barn.dev/lib/wire"
)

type logsCmd struct {
	Node   string `arg:"" optional:"" predictor:"node" help:"Node (not accepted with --source events)."`
	Source string `default:"serial" enum:"serial,qemu,events" help:"serial (console, default), qemu (diagnostics) or events (deployment event log)."`
	Follow bool   `short:"f" help:"Keep printing new lines until interrupted (Ctrl-C exits 130); JSON lines on a pipe, the raw lines as text. Following a node's serial console also prints the node's new events."`
	Events bool   `default:"true" negatable:"" help:"With -f on the serial console: interleave the node's events appended while following (--no-events: the console only)."`
}

// LogsDoc is barn.logs/v1.
type LogsDoc struct {
	Schema string   `json:"schema"`
	Node   string   `json:"node,omitempty"`
	Source string   `json:"source"`
	Path   string   `json:"path"`
	Lines  []string `json:"lines"`
}

// RenderText prints the lines as they are.
func (d LogsDoc) RenderText(w io.Writer) error {
	for _, l := range d.Lines {
		if _, err := io.WriteString(w, l+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// LogLine is one barn.log-line/v1 record of --follow.
type LogLine struct {
	Schema string `json:"schema"`
	Node   string `json:"node,omitempty"`
	Source string `json:"source"`
	Line   string `json:"line"`
}

func (c *logsCmd) Run(env *tool.Env) error {
	root, err := state.Inspect(env.Getenv)
	if err != nil {
		return err
	}
	if c.Source == "events" {
		if c.Node != "" {
			return exitcode.New(exitcode.Usage, "--source events accepts no node").WithReason("events_no_node")
		}
		return c.events(env, root)
	}
	if c.Node == "" {
		return exitcode.New(exitcode.Usage, "logs needs a node for --source %s", c.Source).WithReason("missing_node").WithNext("barn-node logs NODE")
	}
	if !state.ValidNodeName(c.Node) {
		return exitcode.New(exitcode.Usage, "%q is not a node name", c.Node).WithReason("unknown_node")
	}
	name := "serial.log"
	if c.Source == "qemu" {
		name = "qemu.log"
	}
	path := root.NodeFile(c.Node, name)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(root.NodeDir(c.Node)); serr != nil {
			return exitcode.New(exitcode.Usage, "unknown node %q (no %s)", c.Node, root.NodeDir(c.Node)).WithReason("unknown_node").WithNext("barn-node status")
		}
		if !c.Follow {
			return env.Emit(LogsDoc{Schema: "barn.logs/v1", Node: c.Node, Source: c.Source, Path: path, Lines: []string{}})
		}
	} else if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "open %s", path)
	}
	if !c.Follow {
		defer f.Close()
		lines := []string{}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			lines = append(lines, strings.TrimRight(sc.Text(), "\r"))
		}
		if err := sc.Err(); err != nil {
			return exitcode.Wrap(exitcode.Runtime, err, "read %s", path)
		}
		return env.Emit(LogsDoc{Schema: "barn.logs/v1", Node: c.Node, Source: c.Source, Path: path, Lines: lines})
	}
	return c.follow(env, root, path, f)
}

// follow prints complete lines as barn.log-line/v1 JSON lines, polling
// every 250 ms, until ctx is cancelled (exit 130). Following the serial
// console (unless --no-events) also prints each event of the node that is
// appended to the event log while following: a barn.event/v1 JSON line,
// or in the text view the event's row prefixed "[event] ". Past events
// are left to `logs --source events`.
func (c *logsCmd) follow(env *tool.Env, root *state.Root, path string, f *os.File) error {
	var mu sync.Mutex // one writer at a time: console lines and events interleave by line
	eventErr := make(chan error, 1)
	if c.Source == "serial" && c.Events {
		since := env.Now()
		go func() {
			eventErr <- root.FollowEvents(env.Ctx, state.EventFilter{Node: c.Node}, 250*time.Millisecond, func(e state.Event) error {
				if e.Time.Before(since) {
					return nil
				}
				mu.Lock()
				defer mu.Unlock()
				if env.Output.Text {
					var row strings.Builder
					_ = state.EventsText{e}.RenderText(&row)
					_, err := io.WriteString(env.Out, "[event] "+row.String())
					return err
				}
				return wire.Write(env.Out, e)
			})
		}()
	}
	var partial string
	buf := make([]byte, 64<<10)
	for {
		if f == nil {
			if g, err := os.Open(path); err == nil {
				f = g
			}
		}
		if f != nil {
			for {
				n, err := f.Read(buf)
				if n > 0 {
					partial += string(buf[:n])
					for {
						i := strings.IndexByte(partial, '\n')
						if i < 0 {
							break
						}
						line := strings.TrimRight(partial[:i], "\r")
						partial = partial[i+1:]
						mu.Lock()
						err := c.writeLine(env, line)
						mu.Unlock()
						if err != nil {
							return err
						}
					}
				}
				if err != nil || n == 0 {
					break
				}
			}
		}
		select {
		case <-env.Ctx.Done():
			if f != nil {
				f.Close()
			}
			return interrupted()
		case err := <-eventErr:
			if err != nil {
				return err // a damaged event log: integrity, as logs --source events says
			}
		case <-time.After(250 * time.Millisecond):
		}
		// QEMU truncates or replaces serial.log when the node starts again:
		// follow the new file from its start.
		if f != nil {
			if pos, err := f.Seek(0, io.SeekCurrent); err == nil {
				if fi, err := os.Stat(path); err != nil || fi.Size() < pos || !sameFile(f, fi) {
					f.Close()
					f, partial = nil, ""
				}
			}
		}
	}
}

// writeLine prints one followed line: raw in the text view, else a
// barn.log-line/v1 JSON line.
func (c *logsCmd) writeLine(env *tool.Env, line string) error {
	if env.Output.Text {
		_, err := io.WriteString(env.Out, line+"\n")
		return err
	}
	return wire.Write(env.Out, LogLine{Schema: "barn.log-line/v1", Node: c.Node, Source: c.Source, Line: line})
}

func sameFile(f *os.File, fi os.FileInfo) bool {
	cur, err := f.Stat()
	return err == nil && os.SameFile(cur, fi)
}

// interrupted ends a follow on SIGINT/SIGTERM: exit 130 (cancelled), the
// exit table's meaning for an interrupt, without an error message or
// document, since interrupting is how a follow is meant to end.
func interrupted() error { return &tool.SilentExit{Class: exitcode.Cancelled} }

// EventsDoc is barn.events/v1.
type EventsDoc struct {
	Schema string        `json:"schema"`
	Events []state.Event `json:"events"`
}

// RenderText prints the events as one aligned table (state.EventsText).
func (d EventsDoc) RenderText(w io.Writer) error { return state.EventsText(d.Events).RenderText(w) }

func (c *logsCmd) events(env *tool.Env, root *state.Root) error {
	if !c.Follow {
		evs, err := root.ReadEvents(state.EventFilter{})
		if err != nil {
			return err
		}
		return env.Emit(EventsDoc{Schema: "barn.events/v1", Events: evs})
	}
	err := root.FollowEvents(env.Ctx, state.EventFilter{}, 250*time.Millisecond, func(e state.Event) error {
		if env.Output.Text {
			return state.EventsText{e}.RenderText(env.Out)
		}
		return wire.Write(env.Out, e)
	})
	if env.Ctx.Err() != nil {
		return interrupted()
	}
	return err
}
