// Package procid captures and judges the identity tuple of a process (a
// launched QEMU): PID, executable, start time, argv hash and host boot id.
// All of it must match before Barn ever signals a recorded PID. When no
// tuple was recorded or the runtime files are gone, Find re-derives the
// evidence from the process table: the processes whose argv claims a
// node's VM UUID or runtime paths, and which of them runs the node's
// invocation exactly. Frozen tells a stopped process (SIGSTOP) apart.
//
// Sources (Linux, proc(5)): /proc/<pid>/exe (executable), /proc/<pid>/stat
// field 22 starttime in clock ticks since boot, /proc/<pid>/cmdline
// (NUL-terminated argv), /proc/sys/kernel/random/boot_id.
package procid

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"barn.dev/lib/vmrecord"
	"golang.org/x/sys/unix"
)

// Verdict is what a recorded tuple says about the live process now at its PID.
type Verdict int

// The verdicts.
const (
	// Unknown: a live process whose identity could not be read or is
	// ambiguous (same start time and executable, other argv). Barn refuses
	// to act on it.
	Unknown Verdict = iota
	// Dead: no process (or only a zombie) has the PID.
	Dead
	// Ours: boot, start time, executable and argv hash all match.
	Ours
	// Foreign: the PID now belongs to an unrelated process (other boot,
	// other start time or other executable): the recorded process is gone,
	// and the live one must never be signalled.
	Foreign
)

func (v Verdict) String() string {
	switch v {
	case Dead:
		return "dead"
	case Ours:
		return "ours"
	case Foreign:
		return "foreign"
	default:
		return "unknown"
	}
}

// MarshalText makes a Verdict render as its name in JSON.
func (v Verdict) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// ErrNoProcess is returned by Capture when no live (non-zombie) process has
// the PID.
var ErrNoProcess = errors.New("no such process")

// procRoot is /proc; a variable so tests can point at a fixture tree.
var procRoot = "/proc"

// ArgvHash is the hex SHA-256 of the NUL-terminated argv QEMU runs with:
// inv.Binary (argv[0], as passed to exec) then inv.Args, each followed by a
// NUL byte — the exact bytes of /proc/<pid>/cmdline.
func ArgvHash(inv vmrecord.Invocation) string {
	h := sha256.New()
	for _, a := range append([]string{inv.Binary}, inv.Args...) {
		h.Write([]byte(a))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// BootID returns the host's boot id (a UUID that changes on every boot).
func BootID() (string, error) {
	b, err := os.ReadFile(procRoot + "/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("reading boot id: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// Capture reads the identity tuple of the live process pid. It returns
// ErrNoProcess (wrapped) when pid is not alive or is a zombie, and another
// error when the process exists but its identity is unreadable (for
// example another user's /proc/<pid>/exe).
func Capture(pid int) (vmrecord.Process, error) {
	if pid <= 0 {
		return vmrecord.Process{}, fmt.Errorf("capturing pid %d: %w", pid, ErrNoProcess)
	}
	st, err := readStat(pid)
	if err != nil {
		return vmrecord.Process{}, err
	}
	if st.gone() {
		return vmrecord.Process{}, fmt.Errorf("capturing pid %d: zombie: %w", pid, ErrNoProcess)
	}
	if st.ended() {
		return vmrecord.Process{}, fmt.Errorf("capturing pid %d: %w", pid, errLeaderGone)
	}
	if _, err := readExe(pid); err != nil { // an unreadable executable refuses before any wait
		return vmrecord.Process{}, err
	}
	// A process caught inside execve shows an empty command line for a
	// moment; a tuple must never bind an empty argv, so wait briefly
	// (bounded) and refuse if it stays empty (a kernel thread).
	var cmdline []byte
	for i := 0; i < 40; i++ {
		cmdline, err = os.ReadFile(fmt.Sprintf("%s/%d/cmdline", procRoot, pid))
		if err != nil {
			return vmrecord.Process{}, procErr(pid, "cmdline", err)
		}
		if len(cmdline) > 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if len(cmdline) == 0 {
		return vmrecord.Process{}, fmt.Errorf("capturing pid %d: it has no command line (a kernel thread, or still inside exec)", pid)
	}
	exe, err := readExe(pid) // read after the command line: exec may have just replaced it
	if err != nil {
		return vmrecord.Process{}, err
	}
	file, err := exeFile(pid)
	if err != nil {
		return vmrecord.Process{}, err
	}
	boot, err := BootID()
	if err != nil {
		return vmrecord.Process{}, err
	}
	sum := sha256.Sum256(cmdline)
	return vmrecord.Process{
		PID:            pid,
		Executable:     exe,
		ExecutableFile: file,
		Started:        "procstat:" + st.start,
		ArgvHash:       hex.EncodeToString(sum[:]),
		Boot:           boot,
	}, nil
}

// Observe judges the recorded tuple p against the live process now at
// p.PID: Foreign when the boot id differs, or the live start time,
// executable path or executable file differs; Dead when nothing (or a
// zombie, every thread of it) lives there; Ours when everything matches;
// Unknown when the live process cannot be read (also while it exits: its
// memory released or its main thread a zombie while other threads
// remain), when its argv differs with the same start time and executable,
// and for an incomplete tuple (no boot id or no executable file: Capture
// always records both), which is never enough to signal. A dying
// process's verdicts go Ours, Unknown, Dead and never back: Dead is read
// from its stat alone.
func Observe(p vmrecord.Process) Verdict {
	if p.PID <= 0 || p.Boot == "" || p.ExecutableFile == "" {
		return Unknown
	}
	boot, err := BootID()
	if err != nil {
		return Unknown
	}
	if p.Boot != boot {
		return Foreign // recorded in another boot: that process cannot be alive
	}
	st, err := readStat(p.PID)
	if errors.Is(err, ErrNoProcess) {
		return Dead
	}
	if err != nil {
		return Unknown
	}
	if st.gone() {
		return Dead
	}
	if p.Started != "procstat:"+st.start {
		return Foreign
	}
	if st.ended() {
		return Unknown // its main thread exited, others still run (errLeaderGone)
	}
	exe, err := readExe(p.PID)
	if errors.Is(err, ErrNoProcess) {
		return Dead
	}
	if err != nil {
		return Unknown
	}
	if exe != p.Executable {
		return Foreign
	}
	live, err := Capture(p.PID)
	if errors.Is(err, ErrNoProcess) {
		return Dead
	}
	if err != nil || live.Started != p.Started || live.Executable != p.Executable {
		return Unknown // changed while reading
	}
	if live.ExecutableFile != p.ExecutableFile {
		return Foreign // same path, another file: it exec'd something else
	}
	if live.ArgvHash != p.ArgvHash {
		return Unknown
	}
	return Ours
}

// SameExecutable reports whether exe, a captured Process.Executable, is
// the file binary (an invocation's absolute binary path) names: the same
// path, or the path binary resolves to now through symlinks
// (filepath.EvalSymlinks). /proc/<pid>/exe is the path the kernel opened
// at exec, symlinks resolved; Capture strips the " (deleted)" the kernel
// appends once that file is unlinked, so a QEMU whose binary a package
// upgrade replaced since it started is still the process of that path
// (its argv, start time and boot must match as well). An empty binary
// matches nothing.
func SameExecutable(exe, binary string) bool {
	if exe == "" || binary == "" {
		return false
	}
	if exe == binary {
		return true
	}
	resolved, err := filepath.EvalSymlinks(binary)
	return err == nil && exe == resolved
}

// RunsBinary reports whether the captured process p runs the file binary
// names now: SameExecutable by path, and the file p's /proc/<pid>/exe
// opened (p.ExecutableFile) is binary's, by device and inode (stat(2),
// symlinks followed). This is the proof a launch or a process-table scan
// needs before a process is taken as an invocation's: a QEMU whose binary
// was replaced since it started (a package upgrade) runs another file
// than the path names now, so it is not proven by the path and is never
// signalled on that evidence (a tuple recorded at launch still is, by
// Observe).
func RunsBinary(p vmrecord.Process, binary string) bool {
	if !SameExecutable(p.Executable, binary) || p.ExecutableFile == "" {
		return false
	}
	id, err := fileID(binary)
	return err == nil && id == p.ExecutableFile
}

// Alive reports whether pid may name a process that has not ended: its
// main thread runs, or another of its threads does (stat.gone). A stat
// that cannot be read (other than missing) proves nothing, so it counts
// as alive: callers remove a pidfile or call a start failed on !Alive.
func Alive(pid int) bool {
	st, err := readStat(pid)
	if err != nil {
		return !errors.Is(err, ErrNoProcess)
	}
	return !st.gone()
}

// errLeaderGone: the main thread of pid has exited (a zombie) while other
// threads of the process still run, as after pthread_exit in main or in
// the middle of the process's exit. Its identity cannot be read (its
// command line is empty), but it is not gone: never ErrNoProcess.
var errLeaderGone = errors.New("its main thread has exited but other threads still run")

// ended reports whether the thread st describes is a zombie or dead.
func (st stat) ended() bool { return st.state == "Z" || st.state == "X" }

// gone reports whether the process st describes has ended: its main
// thread is a zombie or dead and no other thread is left (num_threads
// counts every thread not yet released; a zombie main thread alone
// counts 1). One read of the main thread's stat: listing
// /proc/<pid>/task instead can miss a thread created or ending while it
// is listed.
func (st stat) gone() bool { return st.ended() && st.threads <= 1 }

// Frozen reports whether every thread of the live process pid is stopped
// (state T, a job-control stop such as SIGSTOP, or t, a tracing stop): no
// thread can run, so nothing in it can answer a socket until it is
// continued. An unreadable or vanished process is not frozen.
func Frozen(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("%s/%d/task", procRoot, pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("%s/%d/task/%s/stat", procRoot, pid, t.Name()))
		if err != nil {
			return false
		}
		st, err := parseStat(pid, b)
		if err != nil || st.state != "T" && st.state != "t" {
			return false
		}
	}
	return true
}

type stat struct {
	state   string // field 3
	start   string // field 22, clock ticks since boot
	kernel  bool   // field 9 (flags) has PF_KTHREAD: a kernel thread
	exiting bool   // field 9 (flags) has PF_EXITING: the thread is in do_exit
	threads int64  // field 20 (num_threads): the process's threads not yet released, the main one included
}

// pfKthread and pfExiting are PF_KTHREAD and PF_EXITING in stat(5)'s
// flags field (include/linux/sched.h).
const (
	pfKthread = 0x00200000
	pfExiting = 0x00000004
)

// readStat parses /proc/<pid>/stat. The comm field (2) may contain spaces
// and parentheses, so fields are counted after the last ')'.
func readStat(pid int) (stat, error) {
	b, err := os.ReadFile(fmt.Sprintf("%s/%d/stat", procRoot, pid))
	if err != nil {
		return stat{}, procErr(pid, "stat", err)
	}
	return parseStat(pid, b)
}

// parseStat parses the contents b of a stat(5) file of pid.
func parseStat(pid int, b []byte) (stat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, fmt.Errorf("parsing /proc/%d/stat: no comm field", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); field 22 is f[19].
	if len(f) < 20 {
		return stat{}, fmt.Errorf("parsing /proc/%d/stat: %d fields after comm, want ≥20", pid, len(f))
	}
	if _, err := strconv.ParseUint(f[19], 10, 64); err != nil {
		return stat{}, fmt.Errorf("parsing /proc/%d/stat starttime %q: %w", pid, f[19], err)
	}
	flags, _ := strconv.ParseUint(f[6], 10, 64)
	threads, err := strconv.ParseInt(f[17], 10, 64)
	if err != nil {
		return stat{}, fmt.Errorf("parsing /proc/%d/stat num_threads %q: %w", pid, f[17], err)
	}
	return stat{state: f[0], start: f[19], kernel: flags&pfKthread != 0, exiting: flags&pfExiting != 0, threads: threads}, nil
}

func readExe(pid int) (string, error) {
	exe, err := os.Readlink(fmt.Sprintf("%s/%d/exe", procRoot, pid))
	if err != nil {
		return "", exeErr(pid, err)
	}
	return strings.TrimSuffix(exe, " (deleted)"), nil
}

// errExiting: /proc/<pid>/exe is missing while the process still has
// threads. The kernel releases a process's memory, which names its
// executable, early in its exit; its open files (a QEMU's disk images and
// their locks) and its other threads go later, so it is not gone yet.
var errExiting = errors.New("exiting: its memory is released, its threads are not")

// exeErr wraps an error reading /proc/<pid>/exe. A missing link is
// ErrNoProcess only when the stat is missing or says the process is gone,
// errExiting when the stat shows it still has threads, and a plain error
// when the stat cannot be read either (which proves nothing) or names a
// kernel thread; other errors are procErr's.
func exeErr(pid int, err error) error {
	if !errors.Is(err, fs.ErrNotExist) {
		return procErr(pid, "exe", err)
	}
	st, serr := readStat(pid)
	switch {
	case errors.Is(serr, ErrNoProcess), serr == nil && st.gone():
		return fmt.Errorf("reading /proc/%d/exe: %w", pid, ErrNoProcess)
	case serr != nil:
		return fmt.Errorf("reading /proc/%d/exe: %v, and its stat: %w", pid, err, serr)
	case st.kernel:
		return fmt.Errorf("reading /proc/%d/exe: a kernel thread has no executable", pid)
	}
	return fmt.Errorf("reading /proc/%d/exe: %w", pid, errExiting)
}

// Exiting reports whether the process p records has begun to end and has
// not yet: the live process at p.PID has p's boot and start time, and
// every thread of it is in or past its exit (PF_EXITING, which a zombie
// thread keeps), while Alive still holds. After SIGKILL or exit that is
// its teardown, which for a large guest's memory takes seconds (about
// 0.25 s per GiB measured here), and until its threads end it may still
// hold its files' locks. A main thread that called pthread_exit while
// others run is not Exiting; an incomplete tuple (as Observe) never is.
func Exiting(p vmrecord.Process) bool {
	if p.PID <= 0 || p.Boot == "" || p.ExecutableFile == "" {
		return false
	}
	if boot, err := BootID(); err != nil || boot != p.Boot {
		return false
	}
	ours := func() bool {
		st, err := readStat(p.PID)
		return err == nil && !st.gone() && p.Started == "procstat:"+st.start
	}
	dir := fmt.Sprintf("%s/%d/task", procRoot, p.PID)
	tasks, err := os.ReadDir(dir)
	if !ours() || err != nil || len(tasks) == 0 {
		return false
	}
	seen := map[string]bool{}
	for _, t := range tasks {
		seen[t.Name()] = true
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "stat"))
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
			continue // released while listed
		}
		ts, perr := parseStat(p.PID, b)
		if err != nil || perr != nil || !ts.exiting { // a zombie thread went through do_exit: PF_EXITING
			return false
		}
	}
	// A thread in its exit starts none, so one started meanwhile (by a
	// thread read before its exit began) is in a second listing.
	again, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, t := range again {
		if !seen[t.Name()] {
			return false
		}
	}
	return ours() // the pid was not reused while its threads were read
}

// exeFile is the ExecutableFile of pid: the device and inode of the file
// its /proc/<pid>/exe opens (a replaced, unlinked binary included).
func exeFile(pid int) (string, error) {
	id, err := fileID(fmt.Sprintf("%s/%d/exe", procRoot, pid))
	if err != nil {
		return "", exeErr(pid, err)
	}
	return id, nil
}

// fileID is "<st_dev>:<st_ino>" of the file path names, symlinks followed.
func fileID(path string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return "", &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino), nil
}

// procErr wraps an error reading /proc/<pid>/<file>: ErrNoProcess when
// the process is gone (ENOENT, or ESRCH: it was reaped between the open
// and the read); else the error. A process whose memory is released but
// whose threads remain reads an empty command line instead (readCmdline)
// and has no exe link (exeErr).
func procErr(pid int, file string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("reading /proc/%d/%s: %w", pid, file, ErrNoProcess)
	}
	return fmt.Errorf("reading /proc/%d/%s: %w", pid, file, err)
}
