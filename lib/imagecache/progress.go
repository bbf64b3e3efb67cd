package imagecache

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Terminal marks a progress writer that is a terminal: pulls draw a live
// progress bar (bytes, speed, ETA) on it. Any other writer gets plain
// throttled lines. A nil writer gets nothing.
type Terminal struct{ io.Writer }

// PlainInterval is the minimum time between two plain progress lines.
const PlainInterval = 2 * time.Second

type progress interface {
	Add(n int64)
	Done()
}

type noProgress struct{}

func (noProgress) Add(int64) {}
func (noProgress) Done()     {}

func isTerminal(w io.Writer) bool {
	if _, ok := w.(Terminal); ok {
		return true
	}
	if f, ok := w.(*os.File); ok {
		return term.IsTerminal(int(f.Fd()))
	}
	return false
}

func newProgress(w io.Writer, label string, total, already int64, now func() time.Time) progress {
	if w == nil {
		return noProgress{}
	}
	if isTerminal(w) {
		bar := progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(label),
			progressbar.OptionShowBytes(true), progressbar.OptionShowTotalBytes(true),
			progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(250*time.Millisecond),
			progressbar.OptionUseIECUnits(true), progressbar.OptionSetWidth(30),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }))
		_ = bar.Set64(already)
		return &barProgress{bar}
	}
	return &lineProgress{w: w, label: label, total: total, done: already, start: now(), startDone: already, last: now(), now: now}
}

// progress is newProgress on q.Progress that also counts for q.Received.
func (q Puller) progress(label string, total, already int64) progress {
	pr := newProgress(q.Progress, label, total, already, q.Now)
	if q.Received == nil {
		return pr
	}
	q.Received(already)
	return &countingProgress{progress: pr, n: already, received: q.Received}
}

// countingProgress passes each count on and reports the running total
// (Add is called by the one goroutine copying the artifact).
type countingProgress struct {
	progress
	n        int64
	received func(int64)
}

func (c *countingProgress) Add(n int64) {
	c.progress.Add(n)
	c.n += n
	c.received(c.n)
}

type barProgress struct{ bar *progressbar.ProgressBar }

func (b *barProgress) Add(n int64) { _ = b.bar.Add64(n) }
func (b *barProgress) Done()       { _ = b.bar.Finish() }

// lineProgress prints "label: 42% 12.0/28.6 MiB at 3.1 MiB/s, ETA 5s" at
// most every PlainInterval; the speed counts only bytes of this run (a
// resumed download does not inflate it).
type lineProgress struct {
	mu          sync.Mutex
	w           io.Writer
	label       string
	total, done int64
	startDone   int64
	start, last time.Time
	now         func() time.Time
}

func (p *lineProgress) Add(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	if t := p.now(); t.Sub(p.last) >= PlainInterval {
		p.last = t
		p.line(t)
	}
}

func (p *lineProgress) line(t time.Time) {
	const mib = 1 << 20
	secs := t.Sub(p.start).Seconds()
	speed := 0.0
	if secs > 0 {
		speed = float64(p.done-p.startDone) / secs
	}
	eta := "unknown"
	if speed > 0 {
		eta = (time.Duration(float64(p.total-p.done)/speed) * time.Second).Round(time.Second).String()
	}
	pct := int64(100)
	if p.total > 0 {
		pct = p.done * 100 / p.total
	}
	fmt.Fprintf(p.w, "%s: %d%% %.1f/%.1f MiB at %.1f MiB/s, ETA %s\n", p.label, pct, float64(p.done)/mib, float64(p.total)/mib, speed/mib, eta)
}

func (p *lineProgress) Done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.line(p.now())
}
