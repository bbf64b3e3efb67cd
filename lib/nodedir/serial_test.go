package nodedir

import (
	"os"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/state"
)

// TestRecordSerialLog: the create publishes serial.log (empty) and
// records it, so the start before QEMU opens (and truncates) it finds
// the recorded file; a deleted log is created anew and recorded; any
// other file at that name — an operator's log with content, or an empty
// 0600 file of the same user's, which an earlier Barn adopted — is a
// conflict and is left as it was.
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
	created, ok := n.Files[state.SerialLogName]
	if !ok || n.SerialLog != p {
		t.Fatalf("the create did not record serial.log: files %v, serial_log %q", n.Files, n.SerialLog)
	}
	if err := os.WriteFile(p, []byte("boot log\n"), 0o600); err != nil { // QEMU writes to it in place
		t.Fatal(err)
	}
	if err := s.RecordSerialLog(n); err != nil || n.Files[state.SerialLogName] != created {
		t.Fatalf("recorded file found again: %v", err)
	}
	// deleted by someone: created anew, recorded
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordSerialLog(n); err != nil {
		t.Fatalf("deleted log: %v", err)
	}
	if why, err := n.Files[state.SerialLogName].Differs(p); err != nil || why != "" {
		t.Fatalf("re-created log's record: %q, %v", why, err)
	}
	for _, theirs := range []string{"operator's notes\n", ""} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(theirs), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordSerialLog(n); exitcode.As(err).Reason != "unexpected_files" {
			t.Fatalf("operator's file %q: %v, want unexpected_files", theirs, err)
		}
		delete(n.Files, state.SerialLogName) // not recorded at all: still never adopted
		if err := s.RecordSerialLog(n); exitcode.As(err).Reason != "unexpected_files" {
			t.Fatalf("unrecorded operator's file %q: %v, want unexpected_files", theirs, err)
		}
		if b, _ := os.ReadFile(p); string(b) != theirs {
			t.Fatalf("operator's file changed: %q", b)
		}
	}
}

// A start refused because qemu.log is not Barn's must not lose the record
// of the serial log it re-created just before: once the operator moves
// qemu.log away, the next start finds Barn's own serial.log, not a
// stranger (review of the qemu.log change).
func TestRefusedQEMULogKeepsTheNewSerialLogRecorded(t *testing.T) {
	s := testStore(t)
	if err := createN1(s); err != nil {
		t.Fatal(err)
	}
	serial := s.Root.NodeFile("n1", state.SerialLogName)
	qemuLog := s.Root.NodeFile("n1", state.QEMULogName)
	if err := os.Remove(serial); err != nil { // the operator deleted the console log
		t.Fatal(err)
	}
	if err := os.WriteFile(qemuLog, []byte("operator's own\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := s.Root.ReadNode("n1")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RecordSerialLog(n); err != nil {
		t.Fatalf("re-creating the serial log: %v", err)
	}
	if e := exitcode.As(s.RecordQEMULog(n)); e == nil || e.Reason != "unexpected_files" {
		t.Fatalf("qemu.log of the operator: %v, want unexpected_files", e)
	}
	if err := os.Remove(qemuLog); err != nil { // the hint: move it away
		t.Fatal(err)
	}
	n, err = s.Root.ReadNode("n1")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RecordSerialLog(n); err != nil {
		t.Fatalf("the next start refuses the serial log Barn made: %v", err)
	}
	if err := s.RecordQEMULog(n); err != nil {
		t.Fatalf("the next start: %v", err)
	}
}
