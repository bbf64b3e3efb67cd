package state

import (
	"os"
	"testing"

	"barn.dev/lib/exitcode"
)

// State documents are deleted only while they are the file this Root read
// or wrote: a copy put over one (a new inode, same bytes), or one this
// Root never loaded, is kept with an integrity error naming it.
func TestDocumentsAreRemovedOnlyByTheIdentityRead(t *testing.T) {
	r := testRoot(t)
	tx := &Transaction{OperationID: "6f1c1a52-31c4-4f44-a1e5-1d0c6f0e9a11", Node: "a", From: Running, To: Stopped,
		Completed: []TxnStep{{Name: "powerdown", Resource: "qmp"}}}
	if err := r.WriteTransaction(tx); err != nil {
		t.Fatal(err)
	}
	path := r.NodeFile("a", TransactionName)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The user restores their own copy over it: same bytes, another file.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	writeRaw(t, path, string(data), 0o600)
	err = r.RemoveTransaction("a")
	if exitcode.As(err) == nil || exitcode.As(err).Class != exitcode.Integrity {
		t.Fatalf("RemoveTransaction of a replaced file: %v, want integrity", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the replaced file was deleted: %v", err)
	}
	// Another Root (another command) that never read it keeps it too.
	r2 := testRoot(t)
	r2.Dir = r.Dir
	if err := r2.RemoveTransaction("a"); exitcode.As(err) == nil || exitcode.As(err).Class != exitcode.Integrity {
		t.Fatalf("RemoveTransaction without reading it: %v, want integrity", err)
	}
	// Once read, it is removed by that identity.
	if _, err := r2.ReadTransaction("a"); err != nil {
		t.Fatal(err)
	}
	if err := r2.RemoveTransaction("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("after RemoveTransaction: %v", err)
	}
}
