package state

import (
	"context"
	"os"
	"path/filepath"
	"strings"
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
	wantClass(t, r.RemoveEvents(), exitcode.Integrity, "record at byte 0 is torn")
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

// bookkeep leaves what a purged deployment leaves: idle lock files of
// every kind (a node lock included) and the emptied runtime directory.
func bookkeep(t *testing.T, r *Root) {
	t.Helper()
	ctx := context.Background()
	l, err := r.LockNodes(ctx, "test", false, nil, []string{"n1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if l, err = r.LockImages(ctx, "test", false); err != nil {
		t.Fatal(err)
	}
	_ = l.Unlock()
	if err := r.AppendEvent(Event{Action: "test", OperationID: "op-00000001", Message: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(r.EventsFile()); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(r.RuntimeDir, 0o700); err != nil {
		t.Fatal(err)
	}
}

func TestRemoveRootTakesOnlyBookkeeping(t *testing.T) {
	r := testRoot(t)
	bookkeep(t, r)
	got, err := r.RemoveRoot(context.Background(), "test", true)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"deployment.lock", "node-n1.lock", "events.lock", "images.lock"}
	for i, w := range want {
		if i >= len(got.Removed) || got.Removed[i] != filepath.Join(r.LocksDir(), w) {
			t.Fatalf("removed %v, want the lock files %v first", got.Removed, want)
		}
	}
	if tail := got.Removed[len(want):]; strings.Join(tail, " ") != r.LocksDir()+" "+r.Dir+" "+r.RuntimeDir {
		t.Fatalf("then removed %v", tail)
	}
	if len(got.Kept) != 0 || r.Exists() {
		t.Fatalf("kept %v (root exists: %v)", got.Kept, r.Exists())
	}
	if _, err := os.Lstat(r.RuntimeDir); !os.IsNotExist(err) {
		t.Fatalf("runtime dir: %v", err)
	}
	// nothing left: nothing to do
	if again, err := r.RemoveRoot(context.Background(), "test", true); err != nil || len(again.Removed)+len(again.Kept) != 0 {
		t.Fatalf("again: %+v, %v", again, err)
	}
}

func TestRemoveRootKeepsWhatIsNotBookkeeping(t *testing.T) {
	r := testRoot(t)
	bookkeep(t, r)
	if _, err := r.EnsureImagesDir(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.Dir, "notes.txt"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.LocksDir(), "other.lock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.RuntimeDir, "stray"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := r.RemoveRoot(context.Background(), "test", true)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		filepath.Join(r.Dir, "images") + ": the image cache: barn-repo purge --yes",
		filepath.Join(r.Dir, "notes.txt") + ": not something Barn writes; move it away",
		filepath.Join(r.LocksDir(), "other.lock") + ": not a lock file Barn writes; move it away",
		r.RuntimeDir + ": a node's runtime files are still there",
	}
	if strings.Join(got.Kept, "\n") != strings.Join(want, "\n") || len(got.Removed) != 0 {
		t.Fatalf("kept:\n%s\nremoved %v", strings.Join(got.Kept, "\n"), got.Removed)
	}
	if _, err := os.Stat(filepath.Join(r.LocksDir(), DeploymentLockName)); err != nil {
		t.Fatal("a lock file went although the root stays")
	}
}

func TestRemoveRootRefusesAHeldLock(t *testing.T) {
	r := testRoot(t)
	bookkeep(t, r)
	other, err := Open(envOf(map[string]string{"HOME": filepath.Dir(r.Dir), "BARN_HOME": r.Dir, "BARN_RUNTIME_DIR": r.RuntimeDir}))
	if err != nil {
		t.Fatal(err)
	}
	l, err := other.LockImages(context.Background(), "barn-repo pull", false)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	_, err = r.RemoveRoot(context.Background(), "test", false)
	if e := exitcode.As(err); err == nil || e.Class != exitcode.Conflict || e.Reason != "images_busy" {
		t.Fatalf("got %v", err)
	}
	for _, f := range []string{DeploymentLockName, ImagesLockName, EventsLockName} {
		if _, err := os.Stat(filepath.Join(r.LocksDir(), f)); err != nil {
			t.Fatalf("%s went while a lock was held: %v", f, err)
		}
	}
}
