package hostnet

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// AttachLockDir holds the host-wide attach locks: a directory every user
// can create files in (sticky, so nobody replaces another's lock), shared
// by every Barn on the host whatever its BARN_HOME.
var AttachLockDir = "/run/lock"

// attachLockWait bounds how long LockAttach waits for another Barn's
// check-then-launch on the same bridge (an ARP probe and a QEMU start:
// seconds) before it gives up.
const attachLockWait = 2 * time.Minute

// LockAttach serialises the address guard with the start it guards, host
// wide: between CheckAddress finding an address free and the node's QEMU
// holding its MAC (visible to the next check through its command line),
// another Barn — another user, another BARN_HOME — must not run the same
// check on the same bridge. The lock is an flock on
// AttachLockDir/barn-attach-<bridge>.lock, never deleted. The file is
// opened without O_CREAT when it exists (fs.protected_regular refuses an
// O_CREAT open of another user's file in a sticky directory, even to
// root) and created 0644 with O_EXCL when it does not; always without
// following a symlink and without blocking (a FIFO planted there), and it
// must be a regular file. It waits up to 2 minutes (polling every 50 ms,
// ending early with ctx); a lock held longer, or a foreign file at the
// path, is an error naming it.
func LockAttach(ctx context.Context, bridge string) (release func(), err error) {
	if bridge == "" || strings.ContainsAny(bridge, "/\x00") {
		return nil, fmt.Errorf("bridge name %q cannot name a lock file", bridge)
	}
	path := filepath.Join(AttachLockDir, "barn-attach-"+bridge+".lock")
	f, err := openLockFile(path, 0o644)
	if err != nil {
		return nil, err
	}
	wait, cancel := context.WithTimeout(ctx, attachLockWait)
	defer cancel()
	if err := waitFlock(wait, f); err != nil {
		f.Close()
		if ctx.Err() == nil && wait.Err() != nil {
			return nil, fmt.Errorf("another Barn has held %s for over %v (lsof %s names it)", path, attachLockWait, path)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil // closing the descriptor drops the lock
}
