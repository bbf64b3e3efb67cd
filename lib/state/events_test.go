package state

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"barn.dev/lib/exitcode"
)

func TestAppendEventFillsAndFilters(t *testing.T) {
	r := testRoot(t)
	if err := r.AppendEvent(Event{Action: "apply", Phase: "start", Message: "begin", OperationID: "op-12345"}); err != nil {
		t.Fatal(err)
	}
	if err := r.AppendEvent(Event{Node: "pg-1", Level: "warn", Action: "start", Message: "slow"}); err != nil {
		t.Fatal(err)
	}
	all, err := r.ReadEvents(EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].Node != "deployment" || all[0].Level != "info" || all[0].Schema != EventSchema || !all[0].Time.Equal(r.now()) {
		t.Fatalf("events = %+v", all)
	}
	one, _ := r.ReadEvents(EventFilter{Node: "pg-1"})
	if len(one) != 1 || one[0].Message != "slow" {
		t.Fatalf("filtered = %+v", one)
	}
	fi, _ := os.Lstat(r.EventsFile())
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("events.jsonl mode %v", fi.Mode())
	}
	for _, bad := range []Event{{Action: "Bad Action"}, {Action: "x", Level: "loud"}, {Action: "x", Node: "../x"}, {Action: "x", OperationID: "short"}} {
		if err := r.AppendEvent(bad); exitcode.ClassOf(err) != exitcode.Runtime {
			t.Errorf("AppendEvent(%+v) = %v, want a runtime refusal", bad, err)
		}
	}
}

func TestEventRecordBound(t *testing.T) {
	r := testRoot(t)
	big := strings.Repeat("é\"<", 40<<10) // escapes grow when encoded
	if err := r.AppendEvent(Event{Action: "big", Message: big}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(r.EventsFile())
	if len(data) > MaxEventBytes || len(data) < MaxEventBytes-1024 {
		t.Fatalf("record is %d bytes, want just under %d", len(data), MaxEventBytes)
	}
	ev, err := r.ReadEvents(EventFilter{})
	if err != nil || len(ev) != 1 || !strings.HasSuffix(ev[0].Message, "…") {
		t.Fatalf("read back: %v", err)
	}
}

func TestEventLogTrimmedAtLineBoundary(t *testing.T) {
	r := testRoot(t)
	msg := strings.Repeat("m", 60<<10)
	var n int
	for size := int64(0); size <= MaxEventsFileSize; n++ {
		if err := r.AppendEvent(Event{Action: "fill", Message: msg, OperationID: "op-" + strings.Repeat("0", 5) + string(rune('a'+n%26))}); err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Lstat(r.EventsFile())
		if fi.Size() < size {
			break // trimmed
		}
		size = fi.Size()
	}
	fi, _ := os.Lstat(r.EventsFile())
	if fi.Size() > EventsTrimTarget || fi.Size() < EventsTrimTarget-2*MaxEventBytes {
		t.Fatalf("after trim the log is %d bytes, want about %d", fi.Size(), EventsTrimTarget)
	}
	ev, err := r.ReadEvents(EventFilter{})
	if err != nil {
		t.Fatalf("trimmed log does not start at a line boundary: %v", err)
	}
	if len(ev) == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%d events, mode %v", len(ev), fi.Mode())
	}
}

func TestEventLogRefusesSymlink(t *testing.T) {
	r := testRoot(t)
	victim := t.TempDir() + "/victim"
	writeRaw(t, victim, "", 0o600)
	if err := os.Symlink(victim, r.EventsFile()); err != nil {
		t.Fatal(err)
	}
	wantClass(t, r.AppendEvent(Event{Action: "x"}), exitcode.Integrity, "symlink")
	if b, _ := os.ReadFile(victim); len(b) != 0 {
		t.Fatal("appended through a symlink")
	}
	_, err := r.ReadEvents(EventFilter{})
	wantClass(t, err, exitcode.Integrity, "symlink")
}

func TestEventLogDamagedLine(t *testing.T) {
	r := testRoot(t)
	if err := r.AppendEvent(Event{Action: "ok"}); err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(r.EventsFile(), os.O_APPEND|os.O_WRONLY, 0)
	_, _ = f.WriteString("{\"schema\":\"barn.event/v1\",\"bogus\":1}\n{\"partial")
	f.Close()
	_, err := r.ReadEvents(EventFilter{})
	wantClass(t, err, exitcode.Integrity, `unknown field "bogus"`)
}

func TestFollowEvents(t *testing.T) {
	r := testRoot(t)
	r.Now = nil // real clock: follow de-duplicates by time after a trim
	if err := r.AppendEvent(Event{Action: "before"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // ended by cancel() on the third event
	defer cancel()
	var mu sync.Mutex
	var got []string
	done := make(chan error)
	go func() {
		done <- r.FollowEvents(ctx, EventFilter{}, 10*time.Millisecond, func(e Event) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, e.Action)
			if len(got) == 3 {
				cancel()
			}
			return nil
		})
	}()
	time.Sleep(50 * time.Millisecond)
	for _, a := range []string{"after-1", "after-2"} {
		if err := r.AppendEvent(Event{Action: a}); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "before,after-1,after-2" {
		t.Fatalf("followed %v", got)
	}
}

func TestFollowEventsAcrossTrim(t *testing.T) {
	r := testRoot(t)
	r.Now = nil
	// The follow ends when the last event arrives; the deadline only ends
	// one that never would (30 s was reached under -race on a loaded
	// machine, and read as lost events).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	msg := strings.Repeat("m", 60<<10)
	total := int(MaxEventsFileSize/(60<<10)) + 20 // enough to force one trim
	var mu sync.Mutex
	seen := map[string]int{}
	var order []string
	done := make(chan error)
	go func() {
		done <- r.FollowEvents(ctx, EventFilter{}, 5*time.Millisecond, func(e Event) error {
			mu.Lock()
			defer mu.Unlock()
			seen[e.Phase]++
			order = append(order, e.Phase)
			if e.Phase == "p"+strconv.Itoa(total-1) {
				cancel()
			}
			return nil
		})
	}()
	trimmed := false
	var prev int64
	for i := 0; i < total; i++ {
		if err := r.AppendEvent(Event{Action: "fill", Phase: "p" + strconv.Itoa(i), Message: msg}); err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Lstat(r.EventsFile())
		if fi.Size() < prev {
			trimmed = true
		}
		prev = fi.Size()
		time.Sleep(time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !trimmed {
		t.Fatal("the log was never trimmed; the test proves nothing")
	}
	for p, n := range seen {
		if n != 1 {
			t.Fatalf("event %s delivered %d times", p, n)
		}
	}
	if len(seen) < total-1 || order[len(order)-1] != "p"+strconv.Itoa(total-1) {
		t.Fatalf("delivered %d of %d events, last %s", len(seen), total, order[len(order)-1])
	}
}

// TestTornEventLogIsIntegrity: a log cut mid-record (truncate(2) inside
// its last line) is an integrity finding naming the file and the torn
// record's byte offset — never a shorter log read back without error.
func TestTornEventLogIsIntegrity(t *testing.T) {
	r := testRoot(t)
	for _, m := range []string{"first", "second"} {
		if err := r.AppendEvent(Event{Node: "n1", OperationID: "5b8e1d7c-3c2e-4f7e-9a49-1d1f6c1e2a10", Action: "apply", Message: m}); err != nil {
			t.Fatal(err)
		}
	}
	data, _ := os.ReadFile(r.EventsFile())
	second := strings.IndexByte(string(data), '\n') + 1
	if err := os.Truncate(r.EventsFile(), int64(len(data)-10)); err != nil {
		t.Fatal(err)
	}
	_, err := r.ReadEvents(EventFilter{})
	wantClass(t, err, exitcode.Integrity, r.EventsFile()+": record at byte "+strconv.Itoa(second)+" is torn")
	if exitcode.As(err).Reason != "torn_event" {
		t.Fatalf("reason %q, want %s", exitcode.As(err).Reason, reasonTornEvent)
	}
	if p := r.Verify(); len(p) != 1 || !strings.Contains(p[0].Message, "is torn") {
		t.Fatalf("Verify = %+v; want the torn record", p)
	}
	// the one manual step, as Verify reports it too (issue 20, case 6):
	// moving the log out of the root, after which the root verifies
	next := exitcode.As(err).Next
	if p := r.Verify(); p[0].Next != next || OneNext(p) != next || !strings.HasPrefix(next, "mv -n "+r.EventsFile()+" ") {
		t.Fatalf("Verify next %q, error next %q; want the mv step", p[0].Next, next)
	}
	saved, _ := os.ReadFile(r.EventsFile())
	if out, err := exec.Command("sh", "-c", next).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", next, err, out)
	}
	if p := r.Verify(); len(p) != 0 {
		t.Fatalf("after %s: Verify = %+v", next, p)
	}
	aside := filepath.Join(filepath.Dir(r.Dir), "barn-events.torn.jsonl")
	if kept, _ := os.ReadFile(aside); string(kept) != string(saved) {
		t.Fatalf("the torn log's records were not kept at %s", aside)
	}
	if err := os.Rename(aside, r.EventsFile()); err != nil {
		t.Fatal(err)
	}

	// torn inside its first record: not an empty log
	if err := os.Truncate(r.EventsFile(), 20); err != nil {
		t.Fatal(err)
	}
	_, err = r.ReadEvents(EventFilter{})
	wantClass(t, err, exitcode.Integrity, "record at byte 0 is torn")

	// the next append keeps the torn bytes as evidence and its own record
	// whole, on a line of its own
	if err := r.AppendEvent(Event{Action: "after", Message: "intact"}); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(r.EventsFile())
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 2 || len(lines[0]) != 20 || !strings.Contains(lines[1], `"message":"intact"`) {
		t.Fatalf("log after appending to a torn one: %q", data)
	}
	_, err = r.ReadEvents(EventFilter{})
	wantClass(t, err, exitcode.Integrity, "record at byte 0")
}

// TestEventReadersWaitForAnAppend: readers take the events lock shared,
// so a record being appended (here: half written under the exclusive
// lock) is never read; the reader sees it whole once the append ends.
func TestEventReadersWaitForAnAppend(t *testing.T) {
	r := testRoot(t)
	if err := r.AppendEvent(Event{Action: "first"}); err != nil {
		t.Fatal(err)
	}
	unlock, err := r.lockEvents()
	if err != nil {
		t.Fatal(err)
	}
	line, err := encodeEvent(&Event{Schema: EventSchema, Time: r.now(), Level: "info", Node: "deployment", Action: "second"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(r.EventsFile(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(line[:len(line)/2]); err != nil {
		t.Fatal(err)
	}
	type read struct {
		evs []Event
		err error
	}
	got := make(chan read, 1)
	go func() {
		evs, err := r.ReadEvents(EventFilter{})
		got <- read{evs, err}
	}()
	select {
	case g := <-got:
		t.Fatalf("ReadEvents returned during an append: %d events, %v", len(g.evs), g.err)
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := f.Write(line[len(line)/2:]); err != nil {
		t.Fatal(err)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	g := <-got
	if g.err != nil || len(g.evs) != 2 || g.evs[1].Action != "second" {
		t.Fatalf("ReadEvents after the append = %d events, %v; want both, whole", len(g.evs), g.err)
	}
}

// TestTrimKeepsATornLog: a torn record must stay evidence until the user
// acts. Appends go on after it, and when the log passes MaxEventsFileSize
// a trim would cut the head, torn record included, leaving a log that
// reads clean; a log that does not read back whole is never trimmed.
func TestTrimKeepsATornLog(t *testing.T) {
	r := testRoot(t)
	if err := r.AppendEvent(Event{Action: "first", Message: "a"}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(r.EventsFile())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(r.EventsFile(), int64(len(data)-10)); err != nil {
		t.Fatal(err)
	}
	filler := strings.Repeat("x", 60<<10)
	for i := 0; i*(60<<10) < MaxEventsFileSize+(1<<20); i++ {
		if err := r.AppendEvent(Event{Action: "fill", Message: filler}); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if fi, err := os.Stat(r.EventsFile()); err != nil || fi.Size() <= MaxEventsFileSize {
		t.Fatalf("the damaged log was trimmed: %v %v", fi.Size(), err)
	}
	if _, err := r.ReadEvents(EventFilter{}); exitcode.ClassOf(err) != exitcode.Integrity || !strings.Contains(err.Error(), "record at byte 0") {
		t.Fatalf("read after the appends: %v, want integrity naming the record at byte 0", err)
	}
	if p := r.Verify(); len(p) == 0 {
		t.Fatal("verify reports nothing for a damaged log")
	}
}
