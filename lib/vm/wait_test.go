package vm

import (
	"context"
	"os/exec"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/procid"
)

// A wait whose deadline passes while its process is provably ending
// (procid.Exiting) follows it until it is gone; one whose process is not
// ending, or unknown, gives up at the deadline.
func TestWaitGoneFollowsAnEndingProcess(t *testing.T) {
	for _, c := range []struct {
		name    string
		exiting func() bool
		want    bool
	}{
		{"ending", func() bool { return true }, true},
		{"not ending", func() bool { return false }, false},
		{"no process known", nil, false},
	} {
		calls := 0
		gone := func() bool { calls++; return calls > 5 } // gone only after the deadline
		if got := waitGone(t.Context(), goneCheck{gone, c.exiting}, 0, 1); got != c.want {
			t.Errorf("%s: waitGone = %v after %d checks, want %v", c.name, got, calls, c.want)
		}
	}
}

// A wait after SIGKILL that its context ends is cancelled, not a process
// that survived SIGKILL.
func TestAwaitKilledCancelledIsCancelled(t *testing.T) {
	c := exec.Command("sleep", "60")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	p, err := procid.Capture(c.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err = awaitKilled(ctx, p, StopOptions{}.withDefaults(), "barn-node status")
	if exitcode.ClassOf(err) != exitcode.Cancelled {
		t.Fatalf("awaitKilled with its context ended: %v (class %s), want cancelled", err, exitcode.ClassOf(err))
	}
}
