package cli

import (
	"reflect"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/lifecycle"
)

// TestWatchStatusFailureNeedsStrikes: a node the status audit fails ends
// the watch as failed only on watchStrikes refreshes in a row; a refresh
// that does not fail it starts the count again; an integrity failure
// (damaged evidence) is a verdict at once.
func TestWatchStatusFailureNeedsStrikes(t *testing.T) {
	strikes := map[string]int{}
	silent := lifecycle.FailureOf("n1", "status", exitcode.New(exitcode.Conflict, "n1: QMP does not answer"))
	forged := lifecycle.FailureOf("n2", "status", exitcode.New(exitcode.Integrity, "n2: QMP proves another VM"))
	refresh := func(fs []lifecycle.Failure, want ...lifecycle.Failure) {
		t.Helper()
		w := map[string]lifecycle.Failure{}
		for _, f := range want {
			w[f.Node] = f
		}
		if got := strike(strikes, fs); !reflect.DeepEqual(got, w) {
			t.Fatalf("strike(%v) = %v, want %v (strikes %v)", fs, got, w, strikes)
		}
	}
	one := []lifecycle.Failure{silent}
	refresh(one)
	refresh(one)
	refresh(nil) // answered: the count starts again
	refresh(one)
	refresh(one)
	refresh(one, silent)
	refresh([]lifecycle.Failure{silent, forged}, silent, forged)
	strikes = map[string]int{}
	refresh([]lifecycle.Failure{forged}, forged)
}
