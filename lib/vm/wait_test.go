package vm

import "testing"

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
