package hostnet

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"barn.dev/lib/exitcode"
	"github.com/gofrs/flock"
)

// The run-directory locks of barn-net: flock(2) on files under RunDir
// ("/run", cleared at boot, so a lock file never outlives the host's
// processes, and the state directory stays removable by uninstall). The
// kernel drops a lock when its holder exits, a crash included.

// FaultLockPath is <RunDir>/barn-net-faults.lock: one fault command at a
// time changes the fault record and the kernel.
func (h *Host) FaultLockPath() string {
	return filepath.Join(or(h.RunDir, "/run"), "barn-net-faults.lock")
}

// NetworkLockPath is <RunDir>/barn-net.lock: one install, uninstall or
// hosts change at a time, from inspection to the last step, so no plan is
// applied over another barn-net's half-made changes.
func (h *Host) NetworkLockPath() string {
	return filepath.Join(or(h.RunDir, "/run"), "barn-net.lock")
}

// lockFaults waits (until ctx ends) for the fault lock and returns its
// release.
func (h *Host) lockFaults(ctx context.Context) (func(), error) {
	l := flock.New(h.FaultLockPath())
	ok, err := l.TryLockContext(ctx, 50*time.Millisecond)
	if err != nil || !ok {
		return nil, exitcode.Wrap(exitcode.Conflict, fmt.Errorf("%v (ctx: %v)", err, ctx.Err()), "waiting for the fault lock %s", h.FaultLockPath()).
			WithReason("faults_busy").WithNext("barn-net fault list")
	}
	return func() { _ = l.Unlock() }, nil
}

// LockNetwork takes the network lock without waiting (another barn-net
// holding it may be waiting for its user's answer) and returns its
// release. Held: conflict network_busy.
func (h *Host) LockNetwork() (func(), error) {
	l := flock.New(h.NetworkLockPath())
	ok, err := l.TryLock()
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "taking the network lock %s", h.NetworkLockPath()).WithReason("network_lock_failed")
	}
	if !ok {
		return nil, exitcode.New(exitcode.Conflict, "another barn-net install, uninstall or hosts change is running (it holds %s)", h.NetworkLockPath()).
			WithReason("network_busy").WithNext("barn-net status   # then run this command again once the other has ended")
	}
	return func() { _ = l.Unlock() }, nil
}
