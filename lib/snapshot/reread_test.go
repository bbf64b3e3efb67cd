package snapshot

import (
	"context"
	"os"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/state"
)

// TestDeleteRereadsUnderLock: a delete that waited for the deployment lock
// behind a restore that was then killed (the record left restoring) judges
// the record as it is once it holds the lock, not as it read it before:
// it refuses, naming restore --force, and the record stays. (Found by
// review.)
func TestDeleteRereadsUnderLock(t *testing.T) {
	home := t.TempDir()
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	env := func(k string) string {
		switch k {
		case "BARN_HOME":
			return home + "/barn"
		case "HOME":
			return home
		}
		return ""
	}
	root, err := state.Open(env)
	if err != nil {
		t.Fatal(err)
	}
	r := &Record{Schema: Schema, Name: "s1", State: Complete, Nodes: []Node{{Node: "n1"}}}
	if err := write(root.Dir, r, r.CreatedAt); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	restore, err := root.LockDeployment(ctx, "restore", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The moment delete waits for the lock, the restore journals and dies.
	e := &Engine{Root: root, Command: "delete", Waiting: func(state.LockHolder) {
		r.State = Restoring
		if err := write(root.Dir, r, r.CreatedAt); err != nil {
			t.Error(err)
		}
		restore.Unlock()
	}}
	_, err = e.Delete(ctx, "s1")
	if ex := exitcode.As(err); ex == nil || ex.Reason != "snapshot_interrupted" || ex.Next != "barn-node snapshot restore s1 --force" {
		t.Fatalf("delete after the restore was killed: %v", err)
	}
	if got, _ := Read(root.Dir, "s1"); got == nil || got.State != Restoring {
		t.Fatalf("record after the refused delete: %+v", got)
	}
}
