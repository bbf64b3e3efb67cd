package vm_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"barn.dev/lib/safefile/safefiletest"
	"barn.dev/lib/vm"
)

// TestReadPidfileNeverReadsThroughASwappedSymlink: the pidfile that names
// the process Barn may signal is checked on the descriptor it is read
// from; a pidfile swapped for a symlink to another file after the check
// (here, one naming PID 1) is never read.
func TestReadPidfileNeverReadsThroughASwappedSymlink(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "other.pid")
	if err := os.WriteFile(other, []byte("1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	safefiletest.SwapRace(t, filepath.Join(dir, "qemu.pid"), []byte("4242\n"), 0o600, other, 3*time.Second,
		func() (string, error) {
			pid, err := vm.ReadPidfile(filepath.Join(dir, "qemu.pid"))
			return strconv.Itoa(pid), err
		},
		func(pid string) bool { return pid == "1" })
	if _, err := vm.ReadPidfile(other + ".missing"); !os.IsNotExist(err) {
		t.Errorf("missing pidfile: %v, want not-exist", err)
	}
}
