package hostnet

import (
	"errors"
	"testing"

	"github.com/vishvananda/netlink"
)

// TestDumpRetriesAnInterruptedDump: a dump the kernel interrupted (the
// table changed under it; seen live when the attach proof listed links
// while a tap came up) is run again, and its partial result is never
// returned; one that never holds still fails after dumpTries.
func TestDumpRetriesAnInterruptedDump(t *testing.T) {
	calls := 0
	got, err := dump(func() ([]string, error) {
		calls++
		if calls < 3 {
			return []string{"partial"}, netlink.ErrDumpInterrupted
		}
		return []string{"lo", "barn0"}, nil
	})
	if err != nil || len(got) != 2 || calls != 3 {
		t.Fatalf("got %v, %v after %d calls", got, err, calls)
	}
	calls = 0
	_, err = dump(func() ([]string, error) { calls++; return nil, netlink.ErrDumpInterrupted })
	if !errors.Is(err, netlink.ErrDumpInterrupted) || calls != dumpTries {
		t.Fatalf("never-still table: %v after %d calls", err, calls)
	}
	calls = 0
	other := errors.New("permission denied")
	if _, err = dump(func() ([]string, error) { calls++; return nil, other }); err != other || calls != 1 {
		t.Fatalf("other error: %v after %d calls (not retried)", err, calls)
	}
}
