// Package vm runs a node's QEMU and proves, stops and audits it by identity:
// QMP (name + UUID) is the primary runtime identity, the process tuple of
// package procid the fallback (design note 4, "A PID Is Not a Virtual
// Machine"; reference behaviour §3.4–3.7).
//
// Nothing here touches BARN_HOME: callers persist the returned tuple.
package vm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/fileid"
	"barn.dev/lib/procid"
	"barn.dev/lib/qmp"
	"barn.dev/lib/safefile"
	"barn.dev/lib/vmrecord"
)

// The reference timeouts.
const (
	DefaultQMPWait  = 15 * time.Second // launch → QMP identity
	DefaultGraceful = 2 * time.Minute  // system_powerdown → exit
	DefaultQuitWait = 10 * time.Second // quit → exit
	DefaultTermWait = 10 * time.Second // SIGTERM → exit
	DefaultKillWait = 5 * time.Second  // SIGKILL → exit
	DefaultPoll     = 100 * time.Millisecond
	AbortBudget     = 30 * time.Second // launch compensation, detached from cancellation
)

// LaunchOptions tunes Launch. Zero values mean the reference defaults.
type LaunchOptions struct {
	Files      []*os.File    // inherited at FD 3, 4, … (must match inv.InheritedFiles)
	Env        []string      // QEMU's environment; nil inherits this process's
	QMPWait    time.Duration // default 15 s
	QMPTimeout time.Duration // one QMP operation, default 5 s
	Poll       time.Duration // default 100 ms
}

func (o LaunchOptions) withDefaults() LaunchOptions {
	if o.QMPWait <= 0 {
		o.QMPWait = DefaultQMPWait
	}
	if o.QMPTimeout <= 0 {
		o.QMPTimeout = qmp.DefaultTimeout
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	return o
}

// Launch runs inv (QEMU with -daemonize), passing files as descriptors 3, 4,
// … (they must match inv.InheritedFiles), then waits up to 15 s for QMP on
// Barn's own monitor (rt.BarnQMP) to answer with name node and UUID
// vmUUID, reads rt.Pidfile,
// captures the process tuple and checks that its argv hash is
// procid.ArgvHash(inv). It returns the tuple to persist.
//
// Errors (*exitcode.Error): conflict "runtime_busy" when something already
// answers on the socket or a live process holds the pidfile; runtime
// "qemu_start_failed" with QEMU's stderr tail when QEMU exits early;
// runtime "qmp_timeout" when QMP never answers; integrity
// "qmp_identity_mismatch" (nothing is cleaned up: the process is not
// provably ours) or "argv_mismatch"; cancelled when ctx ends. On every
// failure but a mismatch, what was started is compensated: QMP quit when
// the identity matches, else verified signals to the pidfile's process.
func Launch(ctx context.Context, inv vmrecord.Invocation, node, vmUUID string, rt vmrecord.Runtime, files ...*os.File) (vmrecord.Process, error) {
	return LaunchWith(ctx, inv, node, vmUUID, rt, LaunchOptions{Files: files})
}

// LaunchWith is Launch with options.
func LaunchWith(ctx context.Context, inv vmrecord.Invocation, node, vmUUID string, rt vmrecord.Runtime, o LaunchOptions) (vmrecord.Process, error) {
	o = o.withDefaults()
	if err := checkLaunchInput(inv, rt, o.Files); err != nil {
		return vmrecord.Process{}, err
	}
	if err := ensureRuntimeDir(rt.Directory); err != nil {
		return vmrecord.Process{}, err
	}
	if err := CleanupRuntime(ctx, rt); err != nil {
		return vmrecord.Process{}, err
	}

	errFile, err := os.CreateTemp(rt.Directory, ".qemu-launch-*.log")
	if err != nil {
		return vmrecord.Process{}, exitcode.Wrap(exitcode.Runtime, err, "creating QEMU launch log")
	}
	defer os.Remove(errFile.Name())
	defer errFile.Close()

	cmd := exec.CommandContext(ctx, inv.Binary, inv.Args...)
	cmd.Stdout, cmd.Stderr = errFile, errFile
	cmd.ExtraFiles = o.Files
	cmd.Env = o.Env
	cmd.WaitDelay = 5 * time.Second
	runErr := cmd.Run()
	if runErr != nil {
		tail := startupTail(inv, errFile.Name())
		abortErr := abort(ctx, inv, node, vmUUID, rt)
		if ctx.Err() != nil {
			return vmrecord.Process{}, withAbort(exitcode.Wrap(exitcode.Cancelled, ctx.Err(), "launching %s", node), abortErr)
		}
		return vmrecord.Process{}, withAbort(exitcode.New(exitcode.Runtime, "QEMU for %s exited during startup (%v): %s", node, runErr, tail).
			WithReason("qemu_start_failed").WithDetail(map[string]string{"stderr": tail}), abortErr)
	}

	proc, err := prove(ctx, inv, node, vmUUID, rt, o, errFile.Name())
	if err != nil {
		if errors.Is(err, qmp.ErrIdentityMismatch) {
			return vmrecord.Process{}, err // not provably ours: touch nothing
		}
		return vmrecord.Process{}, withAbort(err, abort(ctx, inv, node, vmUUID, rt))
	}
	return proc, nil
}

// Adopt proves a QEMU started earlier (an interrupted start) the way Launch
// does after running it: QMP identity within o.QMPWait, pidfile, tuple and
// argv hash. It starts nothing and stops nothing.
func Adopt(ctx context.Context, inv vmrecord.Invocation, node, vmUUID string, rt vmrecord.Runtime, o LaunchOptions) (vmrecord.Process, error) {
	return prove(ctx, inv, node, vmUUID, rt, o.withDefaults(), "")
}

func prove(ctx context.Context, inv vmrecord.Invocation, node, vmUUID string, rt vmrecord.Runtime, o LaunchOptions, errLog string) (vmrecord.Process, error) {
	deadline := time.Now().Add(o.QMPWait)
	var last error
	for {
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return vmrecord.Process{}, exitcode.New(exitcode.Runtime,
				"QMP on %s did not answer within %s: %v", rt.BarnQMP, o.QMPWait, last).
				WithReason("qmp_timeout").WithNext("barn-node logs " + node)
		}
		m := qmp.Monitor{Socket: rt.BarnQMP, Timeout: min(o.QMPTimeout, remaining)}
		err := m.Verify(ctx, node, vmUUID)
		if err == nil {
			break
		}
		last = err
		var qe *qmp.Error
		switch {
		case ctx.Err() != nil:
			return vmrecord.Process{}, exitcode.Wrap(exitcode.Cancelled, ctx.Err(), "waiting for QMP of %s", node)
		case errors.Is(err, qmp.ErrIdentityMismatch):
			return vmrecord.Process{}, mismatch(node, err)
		case errors.As(err, &qe):
			return vmrecord.Process{}, exitcode.Wrap(exitcode.Runtime, err, "QMP of %s refused identity queries", node).
				WithReason("qmp_error").WithDetail(map[string]string{"class": qe.Class})
		case !errors.Is(err, qmp.ErrUnavailable) && !errors.Is(err, qmp.ErrBusy):
			return vmrecord.Process{}, exitcode.Wrap(exitcode.Runtime, err, "QMP of %s", node).WithReason("qmp_error")
		}
		// Unavailable or not greeting yet: still starting, or already dead?
		if pid, perr := ReadPidfile(rt.Pidfile); perr == nil && !procid.Alive(pid) {
			return vmrecord.Process{}, exitcode.New(exitcode.Runtime,
				"QEMU for %s (pid %d) exited before QMP answered%s", node, pid, suffix(startupTail(inv, errLog))).
				WithReason("qemu_start_failed").WithNext("barn-node logs --source qemu " + node)
		}
		if !sleep(ctx, o.Poll) {
			return vmrecord.Process{}, exitcode.Wrap(exitcode.Cancelled, ctx.Err(), "waiting for QMP of %s", node)
		}
	}

	pid, err := ReadPidfile(rt.Pidfile)
	for err != nil && errors.Is(err, os.ErrNotExist) && time.Now().Before(deadline) {
		if !sleep(ctx, o.Poll) {
			break
		}
		pid, err = ReadPidfile(rt.Pidfile)
	}
	if err != nil {
		return vmrecord.Process{}, exitcode.Wrap(exitcode.Runtime, err, "QMP of %s answered but its pidfile is unusable", node).
			WithReason("pidfile_invalid")
	}
	proc, err := procid.Capture(pid)
	if err != nil {
		return vmrecord.Process{}, exitcode.Wrap(exitcode.Runtime, err, "capturing the identity of %s (pid %d)", node, pid).
			WithReason("process_unreadable")
	}
	if want := procid.ArgvHash(inv); proc.ArgvHash != want {
		return vmrecord.Process{}, exitcode.New(exitcode.Integrity,
			"pid %d from %s runs another command line than the invocation of %s (argv hash %s, want %s)",
			pid, rt.Pidfile, node, proc.ArgvHash, want).WithReason("argv_mismatch")
	}
	if !procid.RunsBinary(proc, inv.Binary) {
		return vmrecord.Process{}, exitcode.New(exitcode.Integrity,
			"pid %d from %s runs %s (file %s), not the invocation's binary %s; it is not %s's QEMU",
			pid, rt.Pidfile, proc.Executable, proc.ExecutableFile, inv.Binary, node).WithReason("executable_mismatch")
	}
	return proc, nil
}

// abort is launch compensation (30 s budget, detached from cancellation):
// QMP quit when the identity matches (proven and sent on one session);
// otherwise verified signals to the pidfile's process when it is stable
// and runs inv (this launch's own, never proven, process: a monitor that
// stayed busy through the whole launch is no reason to leave it running);
// nothing on a mismatch.
// It returns nil when nothing of the launch remains running.
func abort(ctx context.Context, inv vmrecord.Invocation, node, vmUUID string, rt vmrecord.Runtime) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), AbortBudget)
	defer cancel()
	err := stopLaunched(ctx, inv, node, vmUUID, rt)
	if err == nil {
		// Nothing of the launch runs: remove the stale socket and pidfile
		// QEMU may have left when it failed (CleanupRuntime refuses live ones).
		if cerr := cleanupSettled(ctx, rt); cerr != nil {
			return fmt.Errorf("cleanup: %w", cerr)
		}
	}
	return err
}

// stopLaunched ends what a failed launch left running. The process to
// signal is the pidfile's when its tuple is stable and it runs inv;
// without one (no pidfile, a dead or unrelated PID) the process table
// decides, as in Stop: a missing pidfile proves nothing.
func stopLaunched(ctx context.Context, inv vmrecord.Invocation, node, vmUUID string, rt vmrecord.Runtime) error {
	t := Target{Node: node, UUID: vmUUID, Runtime: rt, Invocation: inv}
	m := qmp.Monitor{Socket: rt.BarnQMP, Timeout: 2 * time.Second}
	pid, perr := ReadPidfile(rt.Pidfile)
	if perr == nil {
		if p1, err := procid.Capture(pid); err == nil {
			sleep(ctx, DefaultPoll)
			if p2, err := procid.Capture(pid); err == nil && p1 == p2 && runs(p1, inv) {
				t.Process = &p1
			}
		}
	}
	err := m.Verified(ctx, node, vmUUID, "quit", nil, nil)
	var qe *qmp.Error
	switch {
	case err == nil:
		start := time.Now()
		if waitGone(ctx, t.gone(t.Process), DefaultQuitWait, DefaultPoll) {
			return nil
		}
		return fmt.Errorf("cleanup: QEMU still runs %s after QMP quit", since(start))
	case errors.Is(err, qmp.ErrIdentityMismatch):
		return fmt.Errorf("cleanup refused: %w", err)
	case errors.As(err, &qe):
		return fmt.Errorf("cleanup: QMP quit: %w", err)
	}
	if perr != nil && !errors.Is(perr, os.ErrNotExist) {
		return fmt.Errorf("cleanup: %w", perr)
	}
	proc := t.Process
	if proc == nil {
		tab, err := t.table()
		switch {
		case err == nil && tab.Absent():
			return nil // nothing of the launch runs
		case err == nil && tab.Sole() != nil:
			proc = tab.Sole()
		default:
			return fmt.Errorf("cleanup refused: %s", unproven(node, tab, inv, err).Error())
		}
	}
	return signalLadder(ctx, *proc, StopOptions{}.withDefaults())
}

func withAbort(err error, abortErr error) error {
	if abortErr == nil {
		return err
	}
	e := exitcode.As(err)
	c := *e
	c.Message += " (" + abortErr.Error() + ")"
	return &c
}

func mismatch(node string, err error) error {
	return exitcode.Wrap(exitcode.Integrity, err, "refusing to act on %s", node).
		WithReason("qmp_identity_mismatch").
		WithNext("barn-node status " + node)
}

func checkLaunchInput(inv vmrecord.Invocation, rt vmrecord.Runtime, files []*os.File) error {
	if !filepath.IsAbs(inv.Binary) {
		return exitcode.New(exitcode.Usage, "invocation binary %q is not an absolute path", inv.Binary).WithReason("invalid_invocation")
	}
	if rt.QMP == "" || rt.Pidfile == "" || rt.Directory == "" {
		return exitcode.New(exitcode.Usage, "runtime %+v: directory, qmp and pidfile are required", rt).WithReason("invalid_runtime")
	}
	if len(files) != len(inv.InheritedFiles) {
		return exitcode.New(exitcode.Usage, "invocation inherits %d descriptors, %d files given",
			len(inv.InheritedFiles), len(files)).WithReason("invalid_invocation")
	}
	for i, f := range inv.InheritedFiles {
		if f.FD != 3+i || files[i] == nil {
			return exitcode.New(exitcode.Usage, "inherited file %d (%s) must be descriptor %d", i, f.ID, 3+i).
				WithReason("invalid_invocation")
		}
	}
	return nil
}

// ensureRuntimeDir creates dir (0700) when missing and requires it to be a
// real directory owned by this user with no group or world access, the
// rule of the state root: the QMP sockets inside it control the VM and the
// pidfile names what Barn may signal.
func ensureRuntimeDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return exitcode.Wrap(exitcode.Resource, err, "creating runtime directory").WithReason("runtime_dir")
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return exitcode.Wrap(exitcode.Resource, err, "runtime directory").WithReason("runtime_dir")
	}
	uid := os.Geteuid()
	owner := -1
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		owner = int(st.Uid)
	}
	switch {
	case !fi.IsDir():
		return exitcode.New(exitcode.Integrity, "runtime directory %s is not a directory (%s)", dir, fi.Mode().Type()).
			WithReason("runtime_dir")
	case owner != uid:
		return exitcode.New(exitcode.Integrity, "runtime directory %s is owned by uid %d, not by this user (uid %d)", dir, owner, uid).
			WithReason("runtime_dir")
	case fi.Mode().Perm()&0o077 != 0:
		return exitcode.New(exitcode.Integrity, "runtime directory %s has mode %04o; it must be 0700 (no group or world access)", dir, fi.Mode().Perm()).
			WithReason("runtime_dir").WithNext("chmod 0700 " + dir)
	}
	return nil
}

// ReadPidfile reads a QEMU pidfile: a regular file of at most 32 bytes
// holding one positive decimal PID. It is opened once without following a
// symlink and checked on the open descriptor (lib/safefile), so a pidfile
// swapped for a symlink after a check is never read. A missing pidfile
// wraps fs.ErrNotExist.
func ReadPidfile(path string) (int, error) {
	pid, _, err := readPidfile(path)
	return pid, err
}

// readPidfile is ReadPidfile that also returns the lib/fileid identity of
// the file it read (from the same descriptor): what a stale pidfile is
// removed by.
func readPidfile(path string) (int, fileid.ID, error) {
	f, _, err := safefile.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, fileid.ID{}, err
		}
		return 0, fileid.ID{}, fmt.Errorf("pidfile %s: not a regular file of ≤32 bytes: %w", path, err)
	}
	defer f.Close()
	id, err := fileid.OfFile(f)
	if err != nil {
		return 0, fileid.ID{}, fmt.Errorf("pidfile %s: %w", path, err)
	}
	b, err := io.ReadAll(io.LimitReader(f, 33))
	if err != nil || len(b) > 32 {
		return 0, id, fmt.Errorf("pidfile %s: not a regular file of ≤32 bytes", path)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, id, fmt.Errorf("pidfile %s: %q is not a positive PID", path, strings.TrimSpace(string(b)))
	}
	return pid, id, nil
}

// startupTail is the tail of what QEMU said while starting: its stderr
// before it daemonized (launchLog, "" when not captured) or else its -D
// log, where QEMU 7.2 points stderr as soon as it sets up logging when
// it is to daemonize.
func startupTail(inv vmrecord.Invocation, launchLog string) string {
	tail := ""
	if launchLog != "" {
		tail = stderrTail(launchLog)
	}
	if p := qemuLogPath(inv); tail == "" && p != "" {
		tail = stderrTail(p)
	}
	return tail
}

// qemuLogPath is the file of inv's -D option (QEMU's log, its stderr
// once daemonized), or "".
func qemuLogPath(inv vmrecord.Invocation) string {
	if i := slices.Index(inv.Args, "-D"); i >= 0 && i+1 < len(inv.Args) {
		return inv.Args[i+1]
	}
	return ""
}

// stderrTail is the last 10 lines (at most 2 KiB) of the regular file at
// path, trimmed; "" when it cannot be read. It reads through
// safefile.Open and only the last 2 KiB, so a FIFO, a symlink or a huge
// file put at path can neither hang nor flood it.
func stderrTail(path string) string {
	f, fi, err := safefile.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b := make([]byte, 2048)
	k, _ := f.ReadAt(b, max(0, fi.Size()-int64(len(b))))
	b = bytes.TrimSpace(b[:k])
	lines := strings.Split(string(b), "\n")
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	return strings.Join(lines, "\n")
}

func suffix(tail string) string {
	if tail == "" {
		return ""
	}
	return ": " + tail
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
