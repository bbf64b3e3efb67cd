package vm_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"barn.dev/lib/state"
	"barn.dev/lib/vm"
)

// TestAuditWithoutRecordedProcess: when no process tuple is recorded (an
// interrupted or failed start), silence on QMP proves nothing by itself:
// a pidfile naming a live process keeps the runtime unknown, and only a
// missing pidfile or a dead PID makes it inactive. A cancelled audit must
// not crash either.
func TestAuditWithoutRecordedProcess(t *testing.T) {
	dir := t.TempDir()
	rt := state.Runtime{Directory: dir, QMP: filepath.Join(dir, "qmp.sock"), Pidfile: filepath.Join(dir, "qemu.pid")}
	ctx := context.Background()

	if l := vm.Audit(ctx, "n1", "0b5f0a3e-8a4c-4f55-9a43-4a3b8f0d2f11", rt, nil); l.Runtime != vm.RuntimeInactive {
		t.Errorf("no socket, no pidfile: runtime %s (%s), want inactive", l.Runtime, l.Detail)
	}
	if err := os.WriteFile(rt.Pidfile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if l := vm.Audit(ctx, "n1", "0b5f0a3e-8a4c-4f55-9a43-4a3b8f0d2f11", rt, nil); l.Runtime != vm.RuntimeUnknown {
		t.Errorf("pidfile names a live process: runtime %s (%s), want unknown", l.Runtime, l.Detail)
	}
	if err := os.WriteFile(rt.Pidfile, []byte("999999999\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if l := vm.Audit(ctx, "n1", "0b5f0a3e-8a4c-4f55-9a43-4a3b8f0d2f11", rt, nil); l.Runtime != vm.RuntimeInactive {
		t.Errorf("pidfile names no process: runtime %s (%s), want inactive", l.Runtime, l.Detail)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := os.WriteFile(rt.Pidfile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if l := vm.Audit(cancelled, "n1", "0b5f0a3e-8a4c-4f55-9a43-4a3b8f0d2f11", rt, nil); l.Runtime == vm.RuntimeInactive {
		t.Errorf("a cancelled audit with a live pidfile claimed inactive (%s)", l.Detail)
	}
}
