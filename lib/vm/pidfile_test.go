package vm_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/safefile/safefiletest"
	"barn.dev/lib/vm"
	"barn.dev/lib/vmrecord"
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

// TestStalePidfileIsRemovedByTheIdentityChecked: a stale pidfile (its PID
// dead) is removed through the identity of the file that was read: one
// swapped in after the check (a new QEMU's, here naming a live process)
// is kept, and the cleanup is refused (conflict, runtime_busy).
func TestStalePidfileIsRemovedByTheIdentityChecked(t *testing.T) {
	dir := t.TempDir()
	rt := vmrecord.Runtime{Directory: dir, QMP: filepath.Join(dir, "qmp.sock"), BarnQMP: filepath.Join(dir, "barn-qmp.sock"), Pidfile: filepath.Join(dir, "qemu.pid")}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	write := func(pid int) {
		t.Helper()
		if err := os.WriteFile(rt.Pidfile, []byte(strconv.Itoa(pid)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(dead.Process.Pid)
	newer := strconv.Itoa(os.Getpid()) + "\n"
	vm.SetAfterPidfileCheck(func(path string) {
		tmp := path + ".new"
		if err := os.WriteFile(tmp, []byte(newer), 0o600); err != nil {
			t.Error(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(func() { vm.SetAfterPidfileCheck(nil) })
	err := vm.CleanupRuntime(context.Background(), rt)
	if e := exitcode.As(err); e == nil || e.Class != exitcode.Conflict || e.Reason != "runtime_busy" {
		t.Fatalf("cleanup with a pidfile swapped after the check: %v", err)
	}
	if b, _ := os.ReadFile(rt.Pidfile); string(b) != newer {
		t.Fatalf("the pidfile swapped in after the check was removed or changed: %q", b)
	}
	vm.SetAfterPidfileCheck(nil)
	write(dead.Process.Pid)
	if err := vm.CleanupRuntime(context.Background(), rt); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(rt.Pidfile); !os.IsNotExist(err) {
		t.Fatalf("the stale pidfile remains: %v", err)
	}
}
