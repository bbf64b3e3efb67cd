package state

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/wire/wiretest"
)

// TestDamagedEvidenceIsNeverAbsence: each node document, present but
// empty, whitespace or truncated, is integrity (7) naming that file from
// ReadNodeDocuments — never the nil of a missing file.
func TestDamagedEvidenceIsNeverAbsence(t *testing.T) {
	for _, name := range []string{NodeStateName, JournalName, TransactionName} {
		for what, content := range map[string]string{"empty": "", "whitespace": " \n", "truncated": `{"schema":"barn.state`} {
			t.Run(name+"/"+what, func(t *testing.T) {
				r := testRoot(t)
				s := testSpec("n1")
				if err := r.WriteNode(testNode(r, s, "n1")); err != nil {
					t.Fatal(err)
				}
				if d, err := r.ReadNodeDocuments("n1"); err != nil || d.State == nil || d.Journal != nil || d.Transaction != nil {
					t.Fatalf("sound node: %+v, %v", d, err)
				}
				path := r.NodeFile("n1", name)
				if err := os.WriteFile(path, []byte(content), FileMode); err != nil {
					t.Fatal(err)
				}
				d, err := r.ReadNodeDocuments("n1")
				if exitcode.ClassOf(err) != exitcode.Integrity || !strings.Contains(err.Error(), path) {
					t.Fatalf("ReadNodeDocuments = %+v, %v; want integrity naming %s", d, err, path)
				}
			})
		}
	}
}

// TestStrictDocumentsRefuseDuplicateAndCaseVariantNames: every state
// document, the lock holder record and an event-log record refuse a
// repeated member name and a case variant of one (encoding/json v1 read
// {"generation":1,"GENERATION":7} as generation 7).
func TestStrictDocumentsRefuseDuplicateAndCaseVariantNames(t *testing.T) {
	r := testRoot(t)
	s := testSpec("n1")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(r.WriteDeployment(&Deployment{Generation: 1, Spec: s}))
	must(r.WriteNode(testNode(r, s, "n1")))
	must(r.WriteJournal(testJournal(r, "n1")))
	must(r.WriteTransaction(&Transaction{OperationID: "6f1c1a52-31c4-4f44-a1e5-1d0c6f0e9a11", Node: "n1", From: Running, To: Stopped, Completed: []TxnStep{}}))
	lock, err := r.LockDeployment(context.Background(), "test", false, nil)
	must(err)
	defer lock.Unlock()
	must(r.AppendEvent(Event{Action: "apply", Message: "m"}))
	holder, _ := r.lockFile(LockDeploymentName)
	readers := map[string]func() error{
		r.DeploymentFile():                func() error { _, err := r.ReadDeployment(); return err },
		r.NodeFile("n1", NodeStateName):   func() error { _, err := r.ReadNode("n1"); return err },
		r.NodeFile("n1", JournalName):     func() error { _, err := r.ReadJournal("n1"); return err },
		r.NodeFile("n1", TransactionName): func() error { _, err := r.ReadTransaction("n1"); return err },
		holder:                            func() error { _, err := r.Holder(LockDeploymentName); return err },
		r.EventsFile():                    func() error { _, err := r.ReadEvents(EventFilter{}); return err },
	}
	for path, read := range readers {
		good, err := os.ReadFile(path)
		must(err)
		must(read())
		variants, err := wiretest.Variants(bytes.TrimSpace(good))
		must(err)
		for kind, bad := range variants {
			must(os.WriteFile(path, append(bad, '\n'), FileMode))
			if err := read(); exitcode.ClassOf(err) != exitcode.Integrity || !strings.Contains(err.Error(), path) {
				t.Errorf("%s with a %s name: %v; want integrity naming the file", path, kind, err)
			}
		}
		must(os.WriteFile(path, good, FileMode))
	}
}

// TestEventLockSymlinkIsIntegrity: a symlink planted at locks/events.lock
// is damaged state (7) naming it, not a runtime failure to lock.
func TestEventLockSymlinkIsIntegrity(t *testing.T) {
	r := testRoot(t)
	if _, err := r.EnsureLocksDir(); err != nil {
		t.Fatal(err)
	}
	p, err := r.lockFile(lockEventsName)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(t.TempDir(), "elsewhere"), p); err != nil {
		t.Fatal(err)
	}
	err = r.AppendEvent(Event{Action: "apply", Message: "m"})
	if exitcode.ClassOf(err) != exitcode.Integrity || !strings.Contains(err.Error(), p) {
		t.Fatalf("AppendEvent = %v; want integrity naming %s", err, p)
	}
}

// TestLockOrderIsEnforced: deployment, then node locks by name, then
// images; a Root refuses a lock that sorts before one it holds, and lists
// lock names in that order.
func TestLockOrderIsEnforced(t *testing.T) {
	r := testRoot(t)
	ctx := context.Background()
	all, err := r.LockNodes(ctx, "test", false, nil, []string{"b", "a"})
	if err != nil {
		t.Fatal(err)
	}
	img, err := r.LockImages(ctx, "test", false)
	if err != nil {
		t.Fatalf("images after deployment and nodes: %v", err)
	}
	if err := errors.Join(img.Unlock(), all.Unlock()); err != nil {
		t.Fatal(err)
	}
	names, err := r.LockNames()
	if err != nil || strings.Join(names, " ") != "deployment node/a node/b images" {
		t.Fatalf("LockNames = %v, %v", names, err)
	}
	for _, c := range []struct{ first, then string }{{"images", "deployment"}, {"images", "node/a"}, {"node/b", "node/a"}, {"node/a", "deployment"}} {
		take := func(name string) (Lock, error) {
			switch {
			case name == LockImagesName:
				return r.LockImages(ctx, "test", false)
			case name == LockDeploymentName:
				return r.LockDeployment(ctx, "test", false, nil)
			default:
				return r.LockNode(ctx, strings.TrimPrefix(name, "node/"), "test", false)
			}
		}
		first, err := take(c.first)
		if err != nil {
			t.Fatal(err)
		}
		if l, err := take(c.then); exitcode.As(err) == nil || exitcode.As(err).Reason != "lock_order" {
			if l != nil {
				_ = l.Unlock()
			}
			t.Errorf("taking %s while holding %s: %v, want a lock_order refusal", c.then, c.first, err)
		}
		if err := first.Unlock(); err != nil {
			t.Fatal(err)
		}
		l, err := take(c.then)
		if err != nil {
			t.Fatalf("%s after releasing %s: %v", c.then, c.first, err)
		}
		_ = l.Unlock()
	}
}
