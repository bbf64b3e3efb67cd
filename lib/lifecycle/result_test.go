package lifecycle

import (
	"testing"

	"barn.dev/lib/exitcode"
)

// Result.Err applies exitcode.BatchClass and keeps the deciding failure's
// reason and next (issue 12, case 5: 1 of 1 failed used to exit 5).
func TestResultErrClassReasonNext(t *testing.T) {
	usage := exitcode.New(exitcode.Usage, "share source missing").WithReason("share_source_missing").WithNext("mkdir /srv/src")
	conflict := exitcode.New(exitcode.Conflict, "busy").WithReason("runtime_busy")
	damaged := exitcode.New(exitcode.Integrity, "state.json is empty").WithReason("damaged_state").WithNext("barn-state verify")
	cases := []struct {
		name         string
		total        int
		fails        []error
		class        exitcode.Class
		reason, next string
	}{
		{"1 of 1 keeps its class", 1, []error{usage}, exitcode.Usage, "share_source_missing", "mkdir /srv/src"},
		{"1 of 2: the other was kept", 2, []error{usage}, exitcode.Partial, "nodes_failed", "mkdir /srv/src"},
		{"2 of 2 alike", 2, []error{conflict, conflict}, exitcode.Conflict, "runtime_busy", ""},
		{"2 of 2 different", 2, []error{conflict, usage}, exitcode.Partial, "nodes_failed", ""},
		{"damage wins", 3, []error{conflict, damaged}, exitcode.Integrity, "damaged_state", "barn-state verify"},
	}
	for _, c := range cases {
		r := newResult("test")
		for i, err := range c.fails {
			r.fail(string(rune('a'+i)), "start", err)
		}
		e := exitcode.As(r.Err(c.total))
		if e.Class != c.class || e.Reason != c.reason || e.Next != c.next {
			t.Errorf("%s: %s/%s next %q, want %s/%s next %q", c.name, e.Class, e.Reason, e.Next, c.class, c.reason, c.next)
		}
	}
	if newResult("test").Err(3) != nil {
		t.Error("no failures is not nil")
	}
}
