package state

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"barn.dev/lib/exitcode"
)

// TestRemoveNodeLockRemovesOnlyTheHeldFile: a destroyed node's lock file
// is removed only when it is the file whose lock this command holds; a
// file put at that name meanwhile is kept, and not holding the lock
// removes nothing.
func TestRemoveNodeLockRemovesOnlyTheHeldFile(t *testing.T) {
	r := testRoot(t)
	path := filepath.Join(r.LocksDir(), "node-pg-1.lock")
	if err := r.RemoveNodeLock("pg-1"); exitcode.As(err).Reason != "lock_not_held" {
		t.Fatalf("not held: %v", err)
	}
	l, err := r.LockNode(context.Background(), "pg-1", "test", false)
	if err != nil {
		t.Fatal(err)
	}
	// the held file is swapped for another one at the same name
	if err := os.Rename(path, path+".held"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("someone else's"), 0o600); err != nil {
		t.Fatal(err)
	}
	wantClass(t, r.RemoveNodeLock("pg-1"), exitcode.Integrity, "not the lock file this command holds")
	if b, _ := os.ReadFile(path); string(b) != "someone else's" {
		t.Fatalf("foreign file changed: %q", b)
	}
	if err := os.Rename(path+".held", path); err != nil {
		t.Fatal(err)
	}
	if err := r.RemoveNodeLock("pg-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatal("held lock file kept")
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := r.RemoveNodeLock("pg-1"); exitcode.As(err).Reason != "lock_not_held" {
		t.Fatalf("after unlock: %v", err)
	}
}

// TestRemoveEventsOnlyRemovesBarnsLog: purge removes events.jsonl only
// when every line of it is a Barn event record.
func TestRemoveEventsOnlyRemovesBarnsLog(t *testing.T) {
	r := testRoot(t)
	if err := r.RemoveEvents(); err != nil {
		t.Fatalf("no log: %v", err)
	}
	if err := r.AppendEvent(Event{Action: "x"}); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(r.EventsFile(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("not an event\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	wantClass(t, r.RemoveEvents(), exitcode.Integrity, "record at byte")
	if _, err := os.Lstat(r.EventsFile()); err != nil {
		t.Fatal("a log with a foreign line was removed")
	}
	writeRaw(t, r.EventsFile(), `{"schema":"barn.event/v1"`, 0o600) // an unterminated tail
	wantClass(t, r.RemoveEvents(), exitcode.Integrity, "not a complete event record")
	if err := os.Remove(r.EventsFile()); err != nil {
		t.Fatal(err)
	}
	if err := r.AppendEvent(Event{Action: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := r.RemoveEvents(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(r.EventsFile()); !os.IsNotExist(err) {
		t.Fatal("Barn's event log kept")
	}
}
