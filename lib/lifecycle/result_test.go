package lifecycle

import (
	"bytes"
	"encoding/json"
	"strings"
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

// Every result that lists a node under TCG says, in its JSON and its text,
// that performance figures are not meaningful; a KVM-only result says
// nothing (issue 25).
func TestResultPerformanceNote(t *testing.T) {
	for _, c := range []struct {
		accels []string
		want   string
	}{
		{[]string{"kvm", "kvm"}, ""},
		{[]string{"kvm", "tcg"}, TCGPerformanceNote},
		{[]string{"tcg"}, TCGPerformanceNote},
		{nil, ""},
	} {
		r := newResult("apply")
		for i, a := range c.accels {
			r.addNode(NodeResult{Name: string(rune('a' + i)), Accel: a})
		}
		r.sort()
		data, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct{ Performance *string }
		if err := json.Unmarshal(data, &doc); err != nil || doc.Performance == nil {
			t.Fatalf("%v: no performance field in %s (%v)", c.accels, data, err)
		}
		if *doc.Performance != c.want {
			t.Errorf("%v: performance %q, want %q", c.accels, *doc.Performance, c.want)
		}
		var text bytes.Buffer
		if err := r.RenderText(&text); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(text.String(), "performance figures are not meaningful"); got != (c.want != "") {
			t.Errorf("%v: text mentions the note: %v, want %v:\n%s", c.accels, got, c.want != "", text.String())
		}
	}
}
