package state

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/gofrs/flock"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/wire"
)

// Lock names, as accepted by Holder and listed by LockNames. Locks are
// taken in one fixed order — deployment, then the node locks (sorted by
// name), then images — and released in reverse; the event log's lock is a
// leaf, taken exclusively by its writers and shared by its readers. (A command that needs only the
// images lock, such as a pull, takes it alone; a lifecycle command holds
// the deployment and its nodes' locks and takes images while it prepares.)
// A Root refuses, as a runtime error with reason "lock_order", to take a
// lock that sorts before one it already holds: the order is checked at run
// time, not only documented.
const (
	LockImagesName     = "images"
	LockDeploymentName = "deployment"
	lockNodePrefix     = "node/"
	lockEventsName     = "events"
)

// NodeLockName is the lock name of node's lock ("node/<node>").
func NodeLockName(node string) string { return lockNodePrefix + node }

// lockBusyReason is the reason of the conflict a held lock name causes:
// one reason per kind of lock, never one per node.
func lockBusyReason(name string) string {
	switch {
	case name == LockDeploymentName:
		return "deployment_busy"
	case name == LockImagesName:
		return "images_busy"
	case name == lockEventsName:
		return "events_busy"
	}
	return "node_busy"
}

// LockPollInterval is how often a waiting lock is retried.
const LockPollInterval = 25 * time.Millisecond

// maxCommandLen bounds the holder record's command (characters), after
// which it is cut and "…" appended.
const maxCommandLen = 200

// Lock is a held advisory lock. Unlock clears the holder record and
// releases it; it is idempotent. The kernel releases the lock if the
// process dies, so a killed holder never leaves a stuck lock.
type Lock interface{ Unlock() error }

// CommandLine joins argv for a holder record, cut to 200 characters plus
// "…".
func CommandLine(argv []string) string {
	s := strings.Join(argv, " ")
	if utf8.RuneCountInString(s) <= maxCommandLen {
		return s
	}
	return string([]rune(s)[:maxCommandLen]) + "…"
}

// WaitingMessage is the line a waiting command prints on stderr:
// "waiting for <command> (pid N, since 15:04:05)".
func (h LockHolder) WaitingMessage() string {
	if h.PID <= 0 {
		return "waiting for another barn command"
	}
	return fmt.Sprintf("waiting for %s (pid %d, since %s)", h.Command, h.PID, h.Started.Local().Format("15:04:05"))
}

// Note is the line a read-only command reports when the deployment is
// busy: "<command> (pid N, since T) is running; showing recorded state".
func (h LockHolder) Note() string {
	return fmt.Sprintf("%s (pid %d, since %s) is running; showing recorded state", h.Command, h.PID, h.Started.Local().Format("15:04:05"))
}

type heldLock struct {
	mu   sync.Mutex
	fl   *flock.Flock
	path string
	done bool
	root *Root
	key  lockKey
}

// lockKey orders locks: deployment, node locks by name, images.
type lockKey struct {
	rank int
	name string
}

func keyOf(name string) lockKey {
	switch {
	case name == LockDeploymentName:
		return lockKey{0, name}
	case strings.HasPrefix(name, lockNodePrefix):
		return lockKey{1, name}
	default:
		return lockKey{2, name}
	}
}

func (k lockKey) less(o lockKey) bool {
	return k.rank < o.rank || k.rank == o.rank && k.name < o.name
}

// held tracks the locks a Root holds, for the run-time order check and
// for RemoveNodeLock's proof that the file it removes is the one held.
type held struct {
	mu    sync.Mutex
	locks map[lockKey]int
	files map[lockKey]*heldLock // the latest holder of each key
}

// checkOrder refuses a lock that sorts before one this Root holds.
func (r *Root) checkOrder(name string) error {
	k := keyOf(name)
	r.held.mu.Lock()
	defer r.held.mu.Unlock()
	for h, n := range r.held.locks {
		if n > 0 && k.less(h) {
			return exitcode.New(exitcode.Runtime, "lock order violation: taking %s while holding %s (the order is deployment, nodes, images)", name, h.name).
				WithReason("lock_order")
		}
	}
	return nil
}

func (r *Root) noteHeld(l *heldLock, delta int) {
	r.held.mu.Lock()
	defer r.held.mu.Unlock()
	if r.held.locks == nil {
		r.held.locks = map[lockKey]int{}
		r.held.files = map[lockKey]*heldLock{}
	}
	r.held.locks[l.key] += delta
	switch {
	case delta > 0:
		r.held.files[l.key] = l
	case r.held.files[l.key] == l:
		delete(r.held.files, l.key)
	}
}

func (l *heldLock) Unlock() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return nil
	}
	l.done = true
	if l.root != nil {
		defer l.root.noteHeld(l, -1)
	}
	// Clear the holder record while still holding the lock, then release.
	var errs []error
	if f, err := os.OpenFile(l.path, os.O_WRONLY|syscall.O_NOFOLLOW, 0); err == nil {
		errs = append(errs, f.Truncate(0), f.Close())
	} else if !errors.Is(err, fs.ErrNotExist) { // a destroyed node's lock is removed while held
		errs = append(errs, err)
	}
	errs = append(errs, l.fl.Close())
	if err := errors.Join(errs...); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "releasing lock %s", l.path)
	}
	return nil
}

// LockDeployment takes the deployment lock (locks/deployment.lock) for
// command (CommandLine(argv)). With wait=false it tries once; when busy it
// returns a conflict (4) error with reason "deployment_busy" and Detail the
// holder (a LockHolder, or nil when the record is not readable). With
// wait=true it calls waiting(holder) once (when non-nil) and polls every
// 25 ms for up to r.LockWait (10 minutes), bounded by ctx, then fails with
// the same conflict; a cancelled ctx gives cancelled (130).
func (r *Root) LockDeployment(ctx context.Context, command string, wait bool, waiting func(LockHolder)) (Lock, error) {
	return r.acquire(ctx, LockDeploymentName, command, wait, waiting, r.LockWait, "deployment_busy", "the deployment")
}

// LockNode takes node's lock (locks/node-<node>.lock); see LockDeployment.
// Busy → conflict with reason "node_busy".
func (r *Root) LockNode(ctx context.Context, node, command string, wait bool) (Lock, error) {
	if err := checkNodeName(node); err != nil {
		return nil, err
	}
	return r.acquire(ctx, NodeLockName(node), command, wait, nil, r.LockWait, "node_busy", "node "+node)
}

// LockNodeWaiting is LockNode with a waiting callback.
func (r *Root) LockNodeWaiting(ctx context.Context, node, command string, waiting func(LockHolder)) (Lock, error) {
	if err := checkNodeName(node); err != nil {
		return nil, err
	}
	return r.acquire(ctx, NodeLockName(node), command, true, waiting, r.LockWait, "node_busy", "node "+node)
}

// RemoveNodeLock removes locks/node-<node>.lock of a destroyed node. The
// caller holds the deployment lock and that node's lock through this Root:
// since every node lock is taken only under the deployment lock, nobody can
// be waiting on the file being unlinked, and a later holder creates a new
// one. The file is removed only when it is the very file whose lock is
// held (same device and inode as the held descriptor): a file put at that
// name by anything else is kept (integrity). Not holding the lock is a
// runtime error.
func (r *Root) RemoveNodeLock(node string) error {
	if err := checkNodeName(node); err != nil {
		return err
	}
	path, err := r.lockFile(NodeLockName(node))
	if err != nil {
		return err
	}
	r.held.mu.Lock()
	l := r.held.files[keyOf(NodeLockName(node))]
	r.held.mu.Unlock()
	if l == nil {
		return exitcode.New(exitcode.Runtime, "removing %s: the node lock is not held by this command", path).WithReason("lock_not_held")
	}
	heldFI, err := l.fl.Stat()
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "checking held lock %s", path)
	}
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "checking %s", path)
	}
	if !os.SameFile(heldFI, fi) {
		return integrity(path, "is not the lock file this command holds; not removing it")
	}
	return RemoveFileDurable(path)
}

// LockImages takes the image cache lock (locks/images.lock); waiting is
// bounded by r.ImagesLockWait (30 s). Busy → conflict "images_busy".
func (r *Root) LockImages(ctx context.Context, command string, wait bool) (Lock, error) {
	return r.acquire(ctx, LockImagesName, command, wait, nil, r.ImagesLockWait, "images_busy", "the image cache")
}

// LockNodes takes the deployment lock and then every node's lock in sorted
// order (the fixed lock order), returning one Lock that releases them in
// reverse. waiting is called for the deployment lock only.
func (r *Root) LockNodes(ctx context.Context, command string, wait bool, waiting func(LockHolder), nodes []string) (Lock, error) {
	dep, err := r.LockDeployment(ctx, command, wait, waiting)
	if err != nil {
		return nil, err
	}
	return r.WithNodeLocks(ctx, dep, command, wait, nodes)
}

// WithNodeLocks adds the locks of nodes (sorted, duplicates once) to held,
// the deployment lock its caller already holds (having read which nodes it
// acts on), and returns one Lock releasing all of them in reverse. On
// failure it releases held too and returns the error.
func (r *Root) WithNodeLocks(ctx context.Context, held Lock, command string, wait bool, nodes []string) (Lock, error) {
	sorted := append([]string(nil), nodes...)
	sort.Strings(sorted)
	all := multiLock{held}
	for i, n := range sorted {
		if i > 0 && sorted[i-1] == n {
			continue
		}
		l, err := r.LockNode(ctx, n, command, wait)
		if err != nil {
			_ = all.Unlock()
			return nil, err
		}
		all = append(all, l)
	}
	return all, nil
}

type multiLock []Lock

func (m multiLock) Unlock() error {
	var errs []error
	for i := len(m) - 1; i >= 0; i-- {
		errs = append(errs, m[i].Unlock())
	}
	return errors.Join(errs...)
}

func (r *Root) acquire(ctx context.Context, name, command string, wait bool, waiting func(LockHolder), bound time.Duration, reason, what string) (Lock, error) {
	if err := r.checkOrder(name); err != nil {
		return nil, err
	}
	if _, err := r.EnsureLocksDir(); err != nil {
		return nil, err
	}
	path, err := r.lockFile(name)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&fs.ModeSymlink != 0 || !fi.Mode().IsRegular() {
			return nil, integrity(path, "lock file is not a regular file; refusing to use it")
		}
		if ownerOf(fi) != r.uid {
			return nil, integrity(path, "lock file is owned by uid %d, not by this user", ownerOf(fi))
		}
	}
	fl := flock.New(path, flock.SetFlag(os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_CLOEXEC), flock.SetPermissions(FileMode))
	ok, err := fl.TryLock()
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "locking %s", path)
	}
	if !ok {
		if err := r.waitLock(ctx, fl, path, wait, waiting, bound, reason, what); err != nil {
			return nil, err
		}
	}
	l := &heldLock{fl: fl, path: path, root: r, key: keyOf(name)}
	r.noteHeld(l, 1)
	if err := r.writeHolder(path, LockHolder{Schema: LockHolderSchema, PID: os.Getpid(), Command: CommandLine([]string{command}), Started: r.now()}); err != nil {
		_ = l.Unlock()
		return nil, err
	}
	return l, nil
}

// waitLock handles a lock (what, at path) another process holds: busy
// (reason, naming the holder) without wait; else it reports the holder to
// waiting and waits up to bound (DefaultLockWait when ≤0) for fl.
func (r *Root) waitLock(ctx context.Context, fl *flock.Flock, path string, wait bool, waiting func(LockHolder), bound time.Duration, reason, what string) error {
	holder, _ := r.readHolder(path)
	busy := func() error {
		msg := what + " is busy"
		if holder != nil {
			msg = fmt.Sprintf("%s is busy: %s (pid %d) holds it since %s", what, holder.Command, holder.PID, holder.Started.Local().Format(time.RFC3339))
		}
		e := exitcode.New(exitcode.Conflict, "%s", msg).WithReason(reason).WithNext("retry when it finishes")
		if holder != nil {
			e = e.WithDetail(*holder)
		}
		return e
	}
	if !wait {
		return busy()
	}
	if waiting != nil {
		h := LockHolder{Command: "another barn command"}
		if holder != nil {
			h = *holder
		}
		waiting(h)
	}
	if bound <= 0 {
		bound = DefaultLockWait
	}
	wctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	ok, err := fl.TryLockContext(wctx, LockPollInterval)
	if !ok {
		if ctx.Err() != nil {
			return exitcode.Wrap(exitcode.Cancelled, ctx.Err(), "cancelled while waiting for %s", what)
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return exitcode.Wrap(exitcode.Runtime, err, "locking %s", path)
		}
		if h, _ := r.readHolder(path); h != nil {
			holder = h
		}
		return busy()
	}
	return nil
}

// writeHolder replaces the holder record in the (held) lock file:
// truncate, then one write, so a reader sees an empty or a complete record.
func (r *Root) writeHolder(path string, h LockHolder) error {
	data, err := wire.Marshal(h)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "encoding lock holder")
	}
	if len(data) > MaxHolderBytes {
		return exitcode.New(exitcode.Runtime, "lock holder record for %s is larger than %d bytes", path, MaxHolderBytes)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "writing lock holder to %s", path)
	}
	defer f.Close()
	if err := f.Truncate(0); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "writing lock holder to %s", path)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "writing lock holder to %s", path)
	}
	return nil
}

// Holder returns the recorded holder of lockName ("deployment", "images"
// or "node/<node>"), or nil when the lock is free. It never waits and never
// takes the lock. A record whose process no longer exists (a killed
// holder; the kernel has released its lock) is reported as free. A
// malformed record is an integrity error naming the lock file.
func (r *Root) Holder(lockName string) (*LockHolder, error) {
	path, err := r.lockFile(lockName)
	if err != nil {
		return nil, err
	}
	return r.readHolder(path)
}

// readHolder reads the holder record of the lock file at path: nil when
// there is none or its process is gone; the integrity errors of
// readFileStrict and of a malformed record.
func (r *Root) readHolder(path string) (*LockHolder, error) {
	data, err := r.readFileStrict(path, MaxHolderBytes)
	if err != nil || len(data) == 0 {
		return nil, err
	}
	var h LockHolder
	if err := decodeDocument(path, data, LockHolderSchema, &h); err != nil {
		return nil, err
	}
	if err := invalid(path, ValidateHolder(&h)); err != nil {
		return nil, err
	}
	if !processExists(h.PID) {
		return nil, nil
	}
	return &h, nil
}

// processExists reports whether a process with pid exists (signal 0).
func processExists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// LockNames lists the locks that have a lock file: "deployment", then
// "node/<node>" for each node lock (sorted), then "images": the lock
// order.
func (r *Root) LockNames() ([]string, error) {
	entries, err := os.ReadDir(r.LocksDir())
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return []string{}, nil
		}
		return nil, exitcode.Wrap(exitcode.Integrity, err, "reading %s", r.LocksDir())
	}
	names := []string{}
	for _, e := range entries {
		switch name := e.Name(); {
		case name == ImagesLockName:
			names = append(names, LockImagesName)
		case name == DeploymentLockName:
			names = append(names, LockDeploymentName)
		case strings.HasPrefix(name, nodeLockPrefix) && strings.HasSuffix(name, lockSuffix):
			names = append(names, NodeLockName(strings.TrimSuffix(strings.TrimPrefix(name, nodeLockPrefix), lockSuffix)))
		}
	}
	SortLockNames(names)
	return names, nil
}

// SortLockNames sorts lock names into the lock order: deployment, node
// locks by name, images.
func SortLockNames(names []string) {
	sort.Slice(names, func(i, j int) bool { return keyOf(names[i]).less(keyOf(names[j])) })
}
