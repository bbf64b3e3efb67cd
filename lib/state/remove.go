package state

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/gofrs/flock"

	"barn.dev/lib/exitcode"
)

// RootRemoval is what RemoveRoot removed and, when the state root stays,
// why: one line per entry that is still there, with the command that
// removes it.
type RootRemoval struct {
	Removed []string `json:"removed"`
	Kept    []string `json:"kept"`
}

// stays says why an entry directly under BARN_HOME keeps the root.
var stays = map[string]string{
	DeploymentFileName: "the applied deployment: barn-node destroy --purge",
	NodesDirName:       "node directories: barn-node destroy --purge",
	KeysDirName:        "the deployment keys: barn-node destroy --purge",
	DisksDirName:       "retained persistent disks: barn-node destroy --purge",
	EventsFileName:     "the event log: barn-node destroy --purge",
	ImagesDirName:      "the image cache: barn-repo purge --yes",
}

// RemoveRoot removes the state root once only Barn's bookkeeping is left
// in it: idle lock files under locks/ (deployment, images, events and
// node-<node> locks), taken first so that no Barn command holds one, then
// unlinked while held, then locks/ and the root itself. Anything else in
// the root (an applied deployment, keys, disks, the image cache, a file
// Barn does not write) keeps it, listed in Kept with the command that
// removes it; RemoveRoot then removes nothing. With runtime it also
// removes the runtime directory when it is empty (never what is in it).
//
// It is the last step of an uninstall: run it when no other Barn command
// runs (a command already waiting on a lock file when it is unlinked would
// hold a lock nobody else sees). A held lock is conflict (4), the lock's
// busy reason; an unreadable or foreign root is integrity (7).
func (r *Root) RemoveRoot(ctx context.Context, command string, runtime bool) (RootRemoval, error) {
	out := RootRemoval{Removed: []string{}, Kept: []string{}}
	if r.Exists() {
		if err := r.checkDir(r.Dir, true); err != nil {
			return out, err
		}
		locks, err := r.bookkeeping(&out)
		if err != nil {
			return out, err
		}
		if len(out.Kept) == 0 {
			if err := r.removeBookkeeping(ctx, command, locks, &out); err != nil {
				return out, err
			}
		}
	}
	if runtime {
		switch err := syscall.Rmdir(r.RuntimeDir); {
		case err == nil:
			out.Removed = append(out.Removed, r.RuntimeDir)
		case errors.Is(err, fs.ErrNotExist):
		case errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST):
			out.Kept = append(out.Kept, r.RuntimeDir+": a node's runtime files are still there")
		default:
			return out, exitcode.Wrap(exitcode.Runtime, err, "removing %s", r.RuntimeDir)
		}
	}
	return out, nil
}

// bookkeeping returns the lock names whose files are under locks/, adding
// to out.Kept every entry that is not bookkeeping.
func (r *Root) bookkeeping(out *RootRemoval) ([]string, error) {
	ents, err := os.ReadDir(r.Dir)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Integrity, err, "reading %s", r.Dir)
	}
	var locksDir bool
	for _, e := range ents {
		name := e.Name()
		switch why, known := stays[name]; {
		case name == LocksDirName && e.IsDir():
			locksDir = true
		case known:
			out.Kept = append(out.Kept, filepath.Join(r.Dir, name)+": "+why)
		default:
			out.Kept = append(out.Kept, filepath.Join(r.Dir, name)+": not something Barn writes; move it away")
		}
	}
	if !locksDir {
		return nil, nil
	}
	ents, err = os.ReadDir(r.LocksDir())
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Integrity, err, "reading %s", r.LocksDir())
	}
	var names []string
	for _, e := range ents {
		name := e.Name()
		var lock string
		switch {
		case name == DeploymentLockName:
			lock = LockDeploymentName
		case name == ImagesLockName:
			lock = LockImagesName
		case name == EventsLockName:
			lock = lockEventsName
		case strings.HasPrefix(name, nodeLockPrefix) && strings.HasSuffix(name, lockSuffix) &&
			ValidNodeName(strings.TrimSuffix(strings.TrimPrefix(name, nodeLockPrefix), lockSuffix)):
			lock = NodeLockName(strings.TrimSuffix(strings.TrimPrefix(name, nodeLockPrefix), lockSuffix))
		}
		if lock == "" || !e.Type().IsRegular() {
			out.Kept = append(out.Kept, filepath.Join(r.LocksDir(), name)+": not a lock file Barn writes; move it away")
			continue
		}
		names = append(names, lock)
	}
	SortLockNames(names) // the lock order: deployment, node locks, images (events is taken apart)
	return names, nil
}

// removeBookkeeping takes every lock (without waiting), unlinks its file
// while holding it, then removes locks/ and the root.
func (r *Root) removeBookkeeping(ctx context.Context, command string, locks []string, out *RootRemoval) error {
	var held multiLock
	defer func() { _ = held.Unlock() }()
	for _, name := range locks {
		if name == lockEventsName {
			continue // a leaf lock without a holder record: taken last, below
		}
		l, err := r.acquire(ctx, name, command, false, nil, 0, lockBusyReason(name), "the "+name+" lock")
		if err != nil {
			return err
		}
		held = append(held, l)
	}
	if slices.Contains(locks, lockEventsName) {
		path, err := r.lockFile(lockEventsName)
		if err != nil {
			return err
		}
		fl := flock.New(path, flock.SetFlag(os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_CLOEXEC))
		ok, err := fl.TryLock()
		if err != nil {
			return exitcode.Wrap(exitcode.Runtime, err, "locking %s", path)
		}
		if !ok {
			return exitcode.New(exitcode.Conflict, "the event log is being written; retry when that command finishes").WithReason("events_busy")
		}
		defer fl.Close()
	}
	for _, name := range locks {
		path, err := r.lockFile(name)
		if err != nil {
			return err
		}
		if err := os.Remove(path); err != nil {
			return exitcode.Wrap(exitcode.Runtime, err, "removing %s", path)
		}
		out.Removed = append(out.Removed, path)
	}
	for _, d := range []string{r.LocksDir(), r.Dir} {
		switch err := syscall.Rmdir(d); {
		case err == nil:
			out.Removed = append(out.Removed, d)
		case !errors.Is(err, fs.ErrNotExist):
			return exitcode.Wrap(exitcode.Runtime, err, "removing %s", d)
		}
	}
	return nil
}
