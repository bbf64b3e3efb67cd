package human

import (
	"bytes"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"barn.dev/lib/golden"
)

// screen is a fake terminal: it interprets what Progress writes (text,
// "\n", "\r", cursor up "\x1b[1A", erase line "\x1b[2K") into lines.
type screen struct {
	mu    sync.Mutex
	lines []string
	row   int
}

func (s *screen) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.lines) == 0 {
		s.lines = []string{""}
	}
	for str := string(b); str != ""; {
		switch {
		case strings.HasPrefix(str, "\x1b[1A"):
			s.row = max(0, s.row-1)
			str = str[4:]
		case strings.HasPrefix(str, "\x1b[2K"):
			s.lines[s.row] = ""
			str = str[4:]
		case str[0] == '\r':
			str = str[1:] // column 0: the fake only writes whole lines
		case str[0] == '\n':
			s.row++
			if s.row == len(s.lines) {
				s.lines = append(s.lines, "")
			}
			str = str[1:]
		default:
			s.lines[s.row] += str[:1]
			str = str[1:]
		}
	}
	return len(b), nil
}

// text is the screen without trailing blank lines and trailing spaces.
func (s *screen) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, l := range s.lines {
		out = append(out, strings.TrimRight(l, " "))
	}
	return strings.TrimRight(strings.Join(out, "\n"), "\n")
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// On a terminal the table stays at the bottom, one row per node sorted by
// name, updated in place; log lines appear above it; a finished node's
// elapsed time stops.
func TestProgressTableOnATerminal(t *testing.T) {
	var scr screen
	clk := &fakeClock{t: time.Unix(1000, 0)}
	p := NewProgress(&scr, true, clk.now)
	p.Set("pg-2", "preparing", false)
	p.Set("meta", "preparing", false)
	clk.add(3 * time.Second)
	p.Set("meta", "starting", false)
	p.Write([]byte("meta: a log line\n"))
	clk.add(62 * time.Second)
	p.Set("pg-2", "running", true)
	clk.add(10 * time.Second)
	p.Set("meta", "waiting for the guest", false)
	p.Close()
	want := "meta: a log line\n" +
		"NODE  PHASE                  ELAPSED\n" +
		"meta  waiting for the guest  1m 15s\n" +
		"pg-2  running                1m 05s"
	if got := scr.text(); got != want {
		t.Fatalf("screen:\n%s\nwant:\n%s", got, want)
	}
	// after Close, writes pass through below the final table
	p.Write([]byte("done\n"))
	if got := scr.text(); got != want+"\ndone" {
		t.Fatalf("after close:\n%s", got)
	}
}

// On a pipe every change is one line and writes pass through untouched:
// no escape sequences, no redraws.
func TestProgressLinesOnAPipe(t *testing.T) {
	var b bytes.Buffer
	clk := &fakeClock{t: time.Unix(1000, 0)}
	p := NewProgress(&b, false, clk.now)
	p.Set("meta", "starting", false)
	p.Set("meta", "starting", false) // no change, no line
	clk.add(2 * time.Second)
	p.Write([]byte("meta: a log line\n"))
	p.Set("meta", "running", true)
	// a stop: its durable step and then its outcome are both "stopped"
	p.Set("data", "stopped", false)
	p.Set("data", "stopped", true) // the same phase, now done: no second line
	clk.add(time.Minute)
	p.Close()
	want := "meta: starting (0s)\nmeta: a log line\nmeta: running (2s)\ndata: stopped (0s)\n"
	if b.String() != want {
		t.Fatalf("got %q\nwant %q", b.String(), want)
	}
}

// Bytes appear only where the operation moved some: the table grows a
// BYTES column once a row has bytes ("-" for the others), redrawn by the
// tick rather than per update; a pipe shows them in the node's next
// phase line, never a line per update. The terminal screen is a golden
// (testdata/progress-bytes.txt; BARN_UPDATE=1 rewrites it).
func TestProgressBytes(t *testing.T) {
	var scr screen
	clk := &fakeClock{t: time.Unix(1000, 0)}
	p := NewProgress(&scr, true, clk.now)
	p.Set("pg-1", "pulling d12", false)
	p.Set("pg-2", "pulling d12", false)
	p.Set("meta", "starting", false)
	if got := scr.text(); strings.Contains(got, "BYTES") {
		t.Fatalf("BYTES column before any bytes:\n%s", got)
	}
	clk.add(4 * time.Second)
	p.SetBytes("pg-1", 300<<20)
	p.SetBytes("pg-2", 300<<20)
	p.SetBytes("pg-1", 625612288) // the latest count wins
	p.SetBytes("pg-2", 625612288)
	clk.add(90 * time.Second)
	p.Set("pg-1", "overlay", false)
	p.Close()
	golden.Check(t, filepath.Join("testdata", "progress-bytes.txt"), []byte(scr.text()+"\n"))

	var b bytes.Buffer
	clk = &fakeClock{t: time.Unix(1000, 0)}
	p = NewProgress(&b, false, clk.now)
	p.Set("pg-1", "pulling d12", false)
	for i := int64(1); i <= 4; i++ {
		clk.add(time.Second)
		p.SetBytes("pg-1", i<<20)
	}
	p.Set("pg-1", "overlay", false)
	p.Set("meta", "starting", false)
	p.Close()
	want := "pg-1: pulling d12 (0s)\npg-1: overlay (4s, 4 MiB)\nmeta: starting (0s)\n"
	if b.String() != want {
		t.Fatalf("got %q\nwant %q", b.String(), want)
	}
}
