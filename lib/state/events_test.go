package state

import (
	"context"
	"os"
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
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
