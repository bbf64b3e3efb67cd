package exitcode

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestTable(t *testing.T) {
	want := map[Class]int{OK: 0, Runtime: 1, Usage: 2, Capability: 3, Conflict: 4,
		Partial: 5, Resource: 6, Integrity: 7, Cancelled: 130}
	for c, code := range want {
		if got := c.Code(); got != code || !c.Valid() {
			t.Errorf("%s.Code() = %d, Valid %v; want %d, true", c, got, c.Valid(), code)
		}
	}
	if len(codes) != len(want) {
		t.Errorf("the table has %d classes, want %d", len(codes), len(want))
	}
	if Class("bogus").Code() != 1 || Class("bogus").Valid() {
		t.Error("an unknown class must be invalid and exit 1")
	}
}

func TestClassOf(t *testing.T) {
	wrapped := fmt.Errorf("outer: %w", New(Integrity, "digest mismatch").WithReason("image_integrity"))
	cases := []struct {
		err  error
		want Class
	}{
		{nil, OK},
		{errors.New("plain"), Runtime},
		{context.Canceled, Cancelled},
		{fmt.Errorf("x: %w", context.Canceled), Cancelled},
		{wrapped, Integrity},
	}
	for _, c := range cases {
		if got := ClassOf(c.err); got != c.want {
			t.Errorf("ClassOf(%v) = %s, want %s", c.err, got, c.want)
		}
	}
	e := As(wrapped)
	if e.Reason != "image_integrity" || e.ExitCode() != 7 {
		t.Errorf("As kept reason %q code %d", e.Reason, e.ExitCode())
	}
}

func TestWithCopies(t *testing.T) {
	base := New(Conflict, "busy")
	next := base.WithNext("retry").WithReason("deployment_busy").WithDetail(1)
	if base.Next != "" || base.Reason != "" || base.Detail != nil {
		t.Error("With* must not modify the receiver")
	}
	if next.Next != "retry" || next.Reason != "deployment_busy" || next.Detail != 1 {
		t.Errorf("With* lost fields: %+v", next)
	}
	w := Wrap(Runtime, errors.New("cause"), "doing %s", "it")
	if w.Error() != "doing it: cause" || errors.Unwrap(w).Error() != "cause" {
		t.Errorf("Wrap = %q", w.Error())
	}
}

// The batch rule (issue 12, "exit classes mean one thing"): 5 only when
// some nodes succeeded or the failures differ; integrity always wins.
func TestBatchClass(t *testing.T) {
	cases := []struct {
		total  int
		failed []Class
		want   Class
	}{
		{3, nil, OK},
		{1, []Class{Usage}, Usage},                       // 1 of 1 exits as it failed
		{1, []Class{Integrity}, Integrity},               //
		{2, []Class{Conflict, Conflict}, Conflict},       // every node, one class
		{2, []Class{Conflict, Runtime}, Partial},         // different classes
		{3, []Class{Runtime}, Partial},                   // the others were kept
		{3, []Class{Runtime, Integrity}, Integrity},      // damaged evidence is never partial
		{2, []Class{Integrity, Integrity}, Integrity},    //
		{2, []Class{Capability, Capability}, Capability}, //
	}
	for _, c := range cases {
		if got := BatchClass(c.total, c.failed); got != c.want {
			t.Errorf("BatchClass(%d, %v) = %s, want %s", c.total, c.failed, got, c.want)
		}
	}
}

// A cause printed twice is found; the same words in clauses that are not
// adjacent (a path in two clauses, two nodes failing alike) are not.
func TestRepeatedClause(t *testing.T) {
	cause := errors.New("open /x/key: no such file or directory")
	doubled := Wrap(Runtime, cause, "read /x/key: %v", cause)
	if got := doubled.RepeatedClause(); got != "open /x/key: no such file or directory" {
		t.Errorf("doubled cause: RepeatedClause() = %q", got)
	}
	for _, msg := range []string{
		Wrap(Runtime, cause, "read /x/key").Error(),
		"ssh: handshake failed: ssh: unable to authenticate",
		"stat a: not found; stat b: not found",
		"2 of 2 node(s) failed: n1 (start: t1@1 amd64: sha256 mismatch); n2 (start: t1@1 amd64: sha256 mismatch)",
	} {
		if got := (&Error{Message: msg}).RepeatedClause(); got != "" {
			t.Errorf("%q: RepeatedClause() = %q, want none", msg, got)
		}
	}
	short := errors.New("exec: \"ssh\": not found")
	if got := Wrap(Runtime, short, "run ssh: %v", short).RepeatedClause(); got != short.Error() {
		t.Errorf("doubled short cause: RepeatedClause() = %q", got)
	}
}
