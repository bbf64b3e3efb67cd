package cli

import (
	"reflect"
	"testing"

	"barn.dev/lib/lifecycle"
)

// TestWatchStatusFailureNeedsStrikes: a node the status audit fails ends
// the watch as failed only on watchStrikes refreshes in a row; a refresh
// that does not fail it starts the count again.
func TestWatchStatusFailureNeedsStrikes(t *testing.T) {
	strikes := map[string]int{}
	silent := []lifecycle.Failure{{Node: "n1", Stage: "status", Error: "n1: QMP does not answer"}}
	refresh := func(fs []lifecycle.Failure, want map[string]string) {
		t.Helper()
		if got := strike(strikes, fs); !reflect.DeepEqual(got, want) {
			t.Fatalf("strike(%v) = %v, want %v (strikes %v)", fs, got, want, strikes)
		}
	}
	none := map[string]string{}
	refresh(silent, none)
	refresh(silent, none)
	refresh(nil, none) // answered: the count starts again
	refresh(silent, none)
	refresh(silent, none)
	refresh(silent, map[string]string{"n1": "n1: QMP does not answer"})
	both := append(silent, lifecycle.Failure{Node: "n2", Error: "n2: gone"})
	refresh(both, map[string]string{"n1": "n1: QMP does not answer"})
}
