package hostnet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"barn.dev/lib/exitcode"
)

// The run-directory locks of barn-net, one pair per state directory
// (lockKey): flock(2) on files under RunDir (cleared at boot, so a lock
// file never outlives the host's processes, and the state directory stays
// removable by uninstall), opened by
// openLockFile (no symlink followed, no FIFO waited on, a regular file
// only). The kernel drops a lock when its holder exits, a crash included.
//
// Both are root's (0600): no other user can open them to hold barn-net up.
//
//   - The network lock (barn-net-<key>.lock): install, uninstall and the hosts
//     changes hold it exclusively from inspection to their last step; the
//     fault commands hold it shared, so an uninstall never runs beside a
//     fault being added or healed. Never waited for: the holder may be
//     waiting for its user's answer.
//   - The shared lock (barn-net-shared-<key>.lock, keyed on bridge.conf's
//     path): taken after the network lock by every exclusive holder, so
//     that installs of other state directories, which share bridge.conf
//     and the helper, never change them at once. Never waited for.
//   - The fault lock (barn-net-<key>-faults.lock): one fault command at a time
//     changes the fault record and the kernel; waited for until ctx ends.
//     Taken after the network lock, never before.

// FaultLockPath is <RunDir>/barn-net-<key>-faults.lock (lockKey).
func (h *Host) FaultLockPath() string {
	return filepath.Join(or(h.RunDir, defaultRunDir), "barn-net-"+h.lockKey()+"-faults.lock")
}

// NetworkLockPath is <RunDir>/barn-net-<key>.lock (lockKey).
func (h *Host) NetworkLockPath() string {
	return filepath.Join(or(h.RunDir, defaultRunDir), "barn-net-"+h.lockKey()+".lock")
}

// lockKey names the host network the locks guard by its state directory
// (the first 16 hex digits of the SHA-256 of its clean path): the
// manifests and fault records two barn-net processes would race on. Two
// labs with their own state directories (each in its network namespace)
// never wait for each other.
func (h *Host) lockKey() string {
	sum := sha256.Sum256([]byte(filepath.Clean(h.StateDir)))
	return hex.EncodeToString(sum[:8])
}

// LockNetwork takes the network lock exclusively, then the shared lock
// (lockShared), without waiting, and returns their release. Held by
// another: conflict network_busy. A user who cannot open the lock file
// (not root: /run is root's) cannot change the host network either, so
// LockNetwork lets such a run go on unlocked: it can print a plan, and
// its first change would be refused.
func (h *Host) LockNetwork() (func(), error) {
	unlock, err := h.lockNetwork(syscall.LOCK_EX)
	if err != nil {
		return nil, err
	}
	unlockShared, err := h.lockShared()
	if err != nil {
		unlock()
		return nil, err
	}
	return func() { unlockShared(); unlock() }, nil
}

// SharedLockPath is <RunDir>/barn-net-shared-<key>.lock, key the first
// 16 hex digits of the SHA-256 of bridge.conf's path (BARN_NET_ETC): the
// lock of the objects every install on the host shares (shared.go).
func (h *Host) SharedLockPath() string {
	sum := sha256.Sum256([]byte(filepath.Clean(h.BridgeConf())))
	return filepath.Join(or(h.RunDir, defaultRunDir), "barn-net-shared-"+hex.EncodeToString(sum[:8])+".lock")
}

// lockShared takes the shared objects' lock exclusively, without
// waiting: installs and uninstalls of other state directories on this
// host (another BARN_NET_STATE) change bridge.conf and the helper too,
// and each plans on what it read. Held by another: conflict network_busy.
func (h *Host) lockShared() (func(), error) {
	path := h.SharedLockPath()
	f, unlocked, err := h.openRunLock(path)
	if unlocked || err != nil {
		return func() {}, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, exitcode.New(exitcode.Conflict, "another barn-net (another BARN_NET_STATE) is changing %s or the bridge helper on this host (it holds %s)", h.BridgeConf(), path).
				WithReason("network_busy").WithNext("barn-net status   # then run this command again once the other has ended")
		}
		return nil, exitcode.Wrap(exitcode.Runtime, err, "locking %s", path).WithReason("network_lock_failed")
	}
	return func() { _ = f.Close() }, nil
}

func (h *Host) lockNetwork(how int) (func(), error) {
	path := h.NetworkLockPath()
	f, unlocked, err := h.openRunLock(path)
	if unlocked || err != nil {
		return func() {}, err
	}
	if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, exitcode.New(exitcode.Conflict, "another barn-net install, uninstall, hosts change or fault command is running (it holds %s)", path).
				WithReason("network_busy").WithNext("barn-net status   # then run this command again once the other has ended")
		}
		return nil, exitcode.Wrap(exitcode.Runtime, err, "locking %s", path).WithReason("network_lock_failed")
	}
	return func() { _ = f.Close() }, nil // closing the descriptor drops the lock
}

// openRunLock opens barn-net's lock file path, root's only (0600: no
// other user can open it, so none can hold barn-net up), creating the run
// directory if it is missing. A user who cannot open it (not root)
// cannot change the host network either: unlocked, it goes on without
// the lock (it can print a plan; its first change would be refused).
func (h *Host) openRunLock(path string) (f *os.File, unlocked bool, err error) {
	f, err = openLockFile(path, 0o600)
	if err != nil && os.Geteuid() != 0 && (errors.Is(err, fs.ErrPermission) || errors.Is(err, fs.ErrNotExist)) {
		return nil, true, nil
	}
	if errors.Is(err, fs.ErrNotExist) { // root, and the run directory is missing
		if err = os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
			f, err = openLockFile(path, 0o600)
		}
	}
	if err == nil && os.Geteuid() == 0 {
		err = f.Chmod(0o600) // one left readable by another build: root's again
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		return nil, false, exitcode.Wrap(exitcode.Runtime, err, "opening barn-net's lock").WithReason("network_lock_failed").
			WithNext("ls -l " + path + "   # barn-net's lock file: a regular file; remove anything else there")
	}
	return f, false, nil
}

// lockFaults takes the network lock shared (unless the caller holds it
// exclusively: uninstall healing before it removes the bridge), then
// waits (until ctx ends) for the fault lock; it returns their release.
func (h *Host) lockFaults(ctx context.Context, network bool) (func(), error) {
	unlockNet := func() {}
	if network {
		var err error
		if unlockNet, err = h.lockNetwork(syscall.LOCK_SH); err != nil {
			return nil, err
		}
	}
	path := h.FaultLockPath()
	f, unlocked, err := h.openRunLock(path)
	if unlocked || err != nil {
		if err != nil {
			unlockNet()
		}
		return unlockNet, err
	}
	if err := waitFlock(ctx, f); err != nil {
		f.Close()
		unlockNet()
		return nil, exitcode.Wrap(exitcode.Conflict, err, "waiting for the fault lock %s", path).
			WithReason("faults_busy").WithNext("barn-net fault list")
	}
	return func() { _ = f.Close(); unlockNet() }, nil
}

// waitFlock takes an exclusive flock on f, polling every 50 ms until ctx
// ends (the fault lock, the attach lock).
func waitFlock(ctx context.Context, f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("another process holds it: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// openLockFile opens path read-only, creating it (mode, O_EXCL) only when
// absent, without following a symlink or blocking on a FIFO, and proves
// it a regular file. flock(2) needs no write access: a file every user
// can read (0644, the attach lock) is one every user can lock.
func openLockFile(path string, mode fs.FileMode) (*os.File, error) {
	const flags = os.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_CLOEXEC
	f, err := os.OpenFile(path, flags, 0)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = os.OpenFile(path, flags|os.O_CREATE|os.O_EXCL, mode)
		if err == nil {
			err = f.Chmod(mode) // whatever the umask
		}
		if errors.Is(err, fs.ErrExist) { // another process created it meanwhile
			f, err = os.OpenFile(path, flags, 0)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("opening the lock file %s: %w", path, err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("it is a %v, not a regular file; remove it", fi.Mode().Type())
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("the lock file %s: %w", path, err)
	}
	return f, nil
}
