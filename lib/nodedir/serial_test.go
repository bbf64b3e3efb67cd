package nodedir

import (
	"os"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/state"
)

// TestRecordSerialLog: Barn creates serial.log before QEMU opens (and
// truncates) it and records its identity; the recorded file is found
// again; an empty 0600 file of Barn's (a start killed before recording
// it) is taken; any other file at that name is a conflict and is left as
// it was.
func TestRecordSerialLog(t *testing.T) {
	s := testStore(t)
	if err := createN1(s); err != nil {
		t.Fatal(err)
	}
	n, err := s.Root.ReadNode("n1")
	if err != nil {
		t.Fatal(err)
	}
	p := s.Root.NodeFile("n1", state.SerialLogName)
	if err := s.RecordSerialLog(n); err != nil || n.SerialLog != p {
		t.Fatalf("first record: %v, serial_log %q", err, n.SerialLog)
	}
	first := n.Files[state.SerialLogName]
	if why, err := first.Differs(p); err != nil || why != "" {
		t.Fatalf("recorded identity: %q, %v", why, err)
	}
	if err := os.WriteFile(p, []byte("boot log\n"), 0o600); err != nil { // QEMU writes to it in place
		t.Fatal(err)
	}
	if err := s.RecordSerialLog(n); err != nil || n.Files[state.SerialLogName] != first {
		t.Fatalf("recorded file found again: %v", err)
	}
	// a start killed between creating and recording it
	delete(n.Files, state.SerialLogName)
	if err := os.Truncate(p, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordSerialLog(n); err != nil {
		t.Fatalf("empty file of Barn's: %v", err)
	}
	// an operator's file at the name
	delete(n.Files, state.SerialLogName)
	if err := os.WriteFile(p, []byte("operator's notes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordSerialLog(n); exitcode.As(err).Reason != "unexpected_files" {
		t.Fatalf("operator's file: %v, want unexpected_files", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "operator's notes\n" {
		t.Fatalf("operator's file changed: %q", b)
	}
}
