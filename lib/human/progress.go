package human

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// Progress shows a multi-node operation as it runs, one row per node:
// its phase, the time since its first phase (frozen once the node is
// done) and, where the operation moves data for the node (SetBytes), the
// bytes moved so far. On a terminal it keeps a live table at the bottom
// of the stream, redrawn on every phase change and every second, with a
// BYTES column only while some row has bytes; lines written through it
// (Write) appear above the table. Anywhere else it is line-oriented: one
// "NODE: PHASE (ELAPSED)" line per phase change, "NODE: PHASE (ELAPSED,
// BYTES)" once the node has bytes, and Write passes through. It is safe
// for concurrent use; Close ends the redraws.
type Progress struct {
	w        io.Writer
	terminal bool
	now      func() time.Time

	mu     sync.Mutex
	rows   []*progressRow
	drawn  int // table lines on screen (terminal)
	stop   chan struct{}
	closed bool
}

type progressRow struct {
	node, phase string
	start, end  time.Time // end is zero while the node is in progress
	bytes       int64     // bytes moved for the node so far; 0: none shown
}

// NewProgress returns a Progress writing to w; terminal selects the live
// table. now is the clock (nil: time.Now).
func NewProgress(w io.Writer, terminal bool, now func() time.Time) *Progress {
	if now == nil {
		now = time.Now
	}
	p := &Progress{w: w, terminal: terminal, now: now, stop: make(chan struct{})}
	if terminal {
		go p.tick()
	}
	return p
}

// Underlying is the writer Progress writes to.
func (p *Progress) Underlying() io.Writer { return p.w }

// Set records node's phase; done marks the node finished (its elapsed
// time stops until a later phase). On a pipe only a change of phase is a
// line: the same phase again, done or not, prints nothing.
func (p *Progress) Set(node, phase string, done bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	r := p.row(node, now)
	changed := r.phase != phase
	if !changed && r.end.IsZero() == !done {
		return
	}
	r.phase, r.end = phase, time.Time{}
	if done {
		r.end = now
	}
	if !p.terminal {
		// A node whose outcome is named like its last step (stop's
		// durable step "stopped", then its outcome "stopped") only
		// freezes its elapsed time: its line was already printed.
		if changed {
			fmt.Fprintf(p.w, "%s: %s (%s)\n", node, phase, r.detail(now))
		}
		return
	}
	p.redraw(nil)
}

// SetBytes records n, the bytes moved for node so far in this operation
// (such as the image pull it waits on). It draws nothing by itself: the
// table shows it at its next redraw (at most a second later), a pipe in
// the node's next phase line, so a byte counter updated per chunk costs
// no output.
func (p *Progress) SetBytes(node string, n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.row(node, p.now()).bytes = n
}

// row is node's row, added (sorted by name, started at now) when new.
// Callers hold mu.
func (p *Progress) row(node string, now time.Time) *progressRow {
	i := slices.IndexFunc(p.rows, func(r *progressRow) bool { return r.node == node })
	if i < 0 {
		r := &progressRow{node: node, start: now}
		p.rows = append(p.rows, r)
		slices.SortFunc(p.rows, func(a, b *progressRow) int { return strings.Compare(a.node, b.node) })
		return r
	}
	return p.rows[i]
}

// Write writes b (whole lines) above the table on a terminal; elsewhere
// it passes b through.
func (p *Progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.terminal || p.closed {
		return p.w.Write(b)
	}
	p.redraw(b)
	return len(b), nil
}

// Close stops the redraws, leaving the final table on a terminal.
func (p *Progress) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	close(p.stop)
	if p.terminal && len(p.rows) > 0 {
		p.redraw(nil)
	}
}

func (p *Progress) tick() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			if !p.closed && len(p.rows) > 0 {
				p.redraw(nil)
			}
			p.mu.Unlock()
		}
	}
}

// redraw erases the table, writes above (if any), and draws the table
// again, in one write. Callers hold mu.
func (p *Progress) redraw(above []byte) {
	var b bytes.Buffer
	for ; p.drawn > 0; p.drawn-- {
		b.WriteString("\x1b[1A\x1b[2K") // cursor up one line, erase it
	}
	b.WriteString("\r")
	b.Write(above)
	if len(p.rows) > 0 {
		p.table(&b)
		p.drawn = len(p.rows) + 1
	}
	_, _ = p.w.Write(b.Bytes())
}

// table writes the header and one line per row; the BYTES column is
// there only when some row has bytes ("-" for the rows without).
// Callers hold mu.
func (p *Progress) table(w io.Writer) {
	now := p.now()
	withBytes := slices.ContainsFunc(p.rows, func(r *progressRow) bool { return r.bytes > 0 })
	tw := Table(w)
	if withBytes {
		fmt.Fprintln(tw, "NODE\tPHASE\tELAPSED\tBYTES")
	} else {
		fmt.Fprintln(tw, "NODE\tPHASE\tELAPSED")
	}
	for _, r := range p.rows {
		fmt.Fprintf(tw, "%s\t%s\t%s", r.node, r.phase, Duration(r.elapsed(now)))
		if withBytes {
			fmt.Fprintf(tw, "\t%s", r.size())
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
}

// detail is a phase line's parenthesis: the elapsed time, and the bytes
// once there are any.
func (r *progressRow) detail(now time.Time) string {
	if r.bytes > 0 {
		return Duration(r.elapsed(now)) + ", " + Size(r.bytes)
	}
	return Duration(r.elapsed(now))
}

func (r *progressRow) size() string {
	if r.bytes > 0 {
		return Size(r.bytes)
	}
	return "-"
}

func (r *progressRow) elapsed(now time.Time) time.Duration {
	if !r.end.IsZero() {
		return r.end.Sub(r.start)
	}
	return now.Sub(r.start)
}
