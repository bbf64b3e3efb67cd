package state

import (
	"os"
	"testing"

	"barn.dev/lib/exitcode"
)

// Every strict decoder, fuzzed: arbitrary bytes must either decode to a
// document that validates, or fail with an integrity error naming the file
// — never panic, never return a document together with an error.

func fuzzRoot(f *testing.F) *Root {
	r := testRoot(f)
	if _, err := r.EnsureNodeDir("a"); err != nil {
		f.Fatal(err)
	}
	return r
}

func fuzzSeed(f *testing.F, write func(r *Root) error, path func(r *Root) string) {
	r := testRoot(f)
	if err := write(r); err != nil {
		f.Fatal(err)
	}
	data, err := os.ReadFile(path(r))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(`{"schema":"barn.state.node/v9"}`))
	f.Add([]byte("{}{}"))
	f.Add([]byte(""))
}

func checkFuzzResult[T any](t *testing.T, doc *T, err error) {
	if err != nil {
		if doc != nil {
			t.Fatal("document returned together with an error")
		}
		if exitcode.ClassOf(err) != exitcode.Integrity {
			t.Fatalf("class %s, want integrity: %v", exitcode.ClassOf(err), err)
		}
	}
}

func FuzzReadDeployment(f *testing.F) {
	fuzzSeed(f, func(r *Root) error { return r.WriteDeployment(&Deployment{Generation: 1, Spec: testSpec("a")}) },
		func(r *Root) string { return r.DeploymentFile() })
	r := fuzzRoot(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		writeRaw(t, r.DeploymentFile(), string(data), 0o600)
		d, err := r.ReadDeployment()
		checkFuzzResult(t, d, err)
		if err == nil && d != nil && len(ValidateDeployment(d)) > 0 {
			t.Fatal("accepted an invalid deployment")
		}
	})
}

func FuzzReadNode(f *testing.F) {
	fuzzSeed(f, func(r *Root) error { return r.WriteNode(testNode(r, testSpec("a"), "a")) },
		func(r *Root) string { return r.NodeFile("a", NodeStateName) })
	r := fuzzRoot(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		writeRaw(t, r.NodeFile("a", NodeStateName), string(data), 0o600)
		n, err := r.ReadNode("a")
		checkFuzzResult(t, n, err)
	})
}

func FuzzReadJournal(f *testing.F) {
	fuzzSeed(f, func(r *Root) error { return r.WriteJournal(testJournal(r, "a")) },
		func(r *Root) string { return r.NodeFile("a", JournalName) })
	r := fuzzRoot(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		writeRaw(t, r.NodeFile("a", JournalName), string(data), 0o600)
		j, err := r.ReadJournal("a")
		checkFuzzResult(t, j, err)
		if j != nil {
			seen := map[string]bool{}
			for _, a := range j.Completed {
				if seen[a.Path] || len(a.Path) == 0 {
					t.Fatalf("accepted a duplicate or empty artifact path %q", a.Path)
				}
				seen[a.Path] = true
			}
		}
	})
}

func FuzzReadTransaction(f *testing.F) {
	fuzzSeed(f, func(r *Root) error {
		return r.WriteTransaction(&Transaction{OperationID: "6f1c1a52-31c4-4f44-a1e5-1d0c6f0e9a11", Node: "a", From: Running, To: Stopped})
	}, func(r *Root) string { return r.NodeFile("a", TransactionName) })
	r := fuzzRoot(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		writeRaw(t, r.NodeFile("a", TransactionName), string(data), 0o600)
		tx, err := r.ReadTransaction("a")
		checkFuzzResult(t, tx, err)
	})
}

func FuzzReadEvents(f *testing.F) {
	r0 := testRoot(f)
	if err := r0.AppendEvent(Event{Action: "seed", Message: "m"}); err != nil {
		f.Fatal(err)
	}
	data, _ := os.ReadFile(r0.EventsFile())
	f.Add(data)
	f.Add([]byte("{}\n"))
	r := testRoot(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		writeRaw(t, r.EventsFile(), string(data), 0o600)
		ev, err := r.ReadEvents(EventFilter{})
		if err != nil && exitcode.ClassOf(err) != exitcode.Integrity {
			t.Fatalf("class %s: %v", exitcode.ClassOf(err), err)
		}
		for _, e := range ev {
			if len(ValidateEvent(&e)) > 0 {
				t.Fatal("accepted an invalid event")
			}
		}
	})
}

func FuzzHolder(f *testing.F) {
	f.Add([]byte(`{"schema":"barn.state.lock/v1","pid":1,"command":"x","started":"2025-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"pid":-1}`))
	r := testRoot(f)
	if _, err := r.EnsureLocksDir(); err != nil {
		f.Fatal(err)
	}
	path, _ := r.lockFile(LockDeploymentName)
	f.Fuzz(func(t *testing.T, data []byte) {
		writeRaw(t, path, string(data), 0o600)
		h, err := r.Holder(LockDeploymentName)
		checkFuzzResult(t, h, err)
		if h != nil && h.PID <= 0 {
			t.Fatal("accepted a non-positive pid")
		}
	})
}
