package hostnet

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"barn.dev/lib/exitcode"
)

func lockReason(err error) string {
	if e := exitcode.As(err); e != nil {
		return e.Reason
	}
	return ""
}

// TestNetworkLockExcludes: the exclusive network lock refuses a second
// holder at once (network_busy) and a fault command's shared hold
// (faults do not run beside an install or uninstall); shared holds
// coexist; released, it is taken again.
func TestNetworkLockExcludes(t *testing.T) {
	h := &Host{RunDir: t.TempDir(), StateDir: filepath.Join(t.TempDir(), "state")}
	unlock, err := h.LockNetwork()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.LockNetwork(); lockReason(err) != "network_busy" || exitcode.ClassOf(err) != exitcode.Conflict {
		t.Fatalf("second exclusive holder: %v", err)
	}
	if _, err := h.lockFaults(context.Background(), true); lockReason(err) != "network_busy" {
		t.Fatalf("fault command during an install: %v", err)
	}
	heal, err := h.lockFaults(context.Background(), false) // uninstall's own heal
	if err != nil {
		t.Fatalf("the holder's own fault lock: %v", err)
	}
	heal()
	unlock()
	a, err := h.lockFaults(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.LockNetwork(); lockReason(err) != "network_busy" {
		t.Fatalf("install during a fault command: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := h.lockFaults(ctx, true); lockReason(err) != "faults_busy" {
		t.Fatalf("second fault command (waits for the fault lock until ctx ends): %v", err)
	}
	a()
	again, err := h.LockNetwork()
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	defer again()
	// Another host network (another state directory) sharing this one's
	// bridge.conf and helper (a second user's bridge) waits for nothing
	// of its own, but not both change the shared objects at once: refused
	// by the shared lock. One with its own bridge.conf (a lab in its own
	// namespace and /etc) is never refused by this one's.
	if _, err := (&Host{RunDir: h.RunDir, StateDir: filepath.Join(t.TempDir(), "other")}).LockNetwork(); lockReason(err) != "network_busy" ||
		!strings.Contains(err.Error(), "another BARN_NET_STATE") {
		t.Fatalf("a second host network on the same bridge.conf: %v", err)
	}
	other, err := (&Host{RunDir: h.RunDir, EtcDir: t.TempDir(), StateDir: filepath.Join(t.TempDir(), "other")}).LockNetwork()
	if err != nil {
		t.Fatalf("a second host network with its own bridge.conf: %v", err)
	}
	other()
}

// TestNetworkLockFileIsProven: a FIFO at the lock path is refused at once
// (never waited on in open(2)), a symlink is never followed (its target
// is not created), and a missing run directory is created (root).
func TestNetworkLockFileIsProven(t *testing.T) {
	run := t.TempDir()
	if err := syscall.Mkfifo((&Host{RunDir: run}).NetworkLockPath(), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := (&Host{RunDir: run}).LockNetwork(); done <- err }()
	select {
	case err := <-done:
		if lockReason(err) != "network_lock_failed" || exitcode.As(err).Next == "" {
			t.Fatalf("a FIFO as the lock: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("LockNetwork blocked in open(2) on a FIFO")
	}
	run, victim := t.TempDir(), filepath.Join(t.TempDir(), "nologin")
	if err := os.Symlink(victim, (&Host{RunDir: run}).NetworkLockPath()); err != nil {
		t.Fatal(err)
	}
	if unlock, err := (&Host{RunDir: run}).LockNetwork(); err == nil {
		unlock()
		t.Fatal("a symlink was taken as the lock")
	}
	if _, err := os.Lstat(victim); err == nil {
		t.Fatal("LockNetwork followed a symlink and created its target")
	}
	if os.Geteuid() == 0 {
		missing := filepath.Join(t.TempDir(), "run")
		unlock, err := (&Host{RunDir: missing}).LockNetwork()
		if err != nil {
			t.Fatalf("missing run directory: %v", err)
		}
		unlock()
		// root's only: no other user can open it to hold barn-net up
		if fi, err := os.Stat((&Host{RunDir: missing}).NetworkLockPath()); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("lock file mode: %v %v", fi.Mode(), err)
		}
	}
}
