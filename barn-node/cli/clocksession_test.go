package cli

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Each SSH session with a node (time sync makes three, check two) has the
// whole --timeout of its own; one that the bound cuts short is "no answer
// within" it, one cancelled from outside keeps its own error.
func TestClockSessionBoundsEachSessionAlone(t *testing.T) {
	f := clockFlags{Timeout: 50 * time.Millisecond}
	for i := range 3 {
		start := time.Now()
		err := f.session(context.Background(), func(ctx context.Context) error {
			d, ok := ctx.Deadline()
			if !ok || d.Before(start.Add(f.Timeout)) {
				t.Errorf("session %d: deadline %v, want at least %v after its start", i, d.Sub(start), f.Timeout)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
	}

	err := f.session(context.Background(), func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})
	if !errors.As(err, new(noAnswerError)) || err.Error() != "no answer within 50ms (paused, or its management link is down)" {
		t.Errorf("cut short: %v", err)
	}

	parent, cancel := context.WithCancel(context.Background())
	cancel()
	err = f.session(parent, func(ctx context.Context) error { return ctx.Err() })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled from outside: %v", err)
	}
}
