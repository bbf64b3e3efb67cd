package procid

import (
	"testing"
	"time"
)

// StartedAt puts a process started now at now (btime has one-second
// resolution, so within a second either way), and knows nothing about a
// tuple from another boot or without a procstat start.
func TestStartedAtIsTheWallClockStart(t *testing.T) {
	before := time.Now()
	c := startSleep(t)
	p, err := Capture(c.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	got, ok := StartedAt(p)
	if !ok {
		t.Fatalf("StartedAt(%+v) not known", p)
	}
	if got.Before(before.Add(-time.Second)) || got.After(after.Add(time.Second)) {
		t.Fatalf("StartedAt = %s, want between %s and %s", got, before, after)
	}
	other := p
	other.Boot = "00000000-0000-0000-0000-000000000000"
	if _, ok := StartedAt(other); ok {
		t.Fatal("a tuple from another boot has a start time on this one")
	}
	other = p
	other.Started = "12345"
	if _, ok := StartedAt(other); ok {
		t.Fatal("a start time that is not procstat ticks was converted")
	}
}
