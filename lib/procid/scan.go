package procid

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"barn.dev/lib/vmrecord"
)

// Claim is what marks a QEMU as one node's in its argv: the -uuid value
// (the node's VM UUID, random per node) and its runtime paths (pidfile and
// QMP sockets, as -pidfile PATH, -qmp unix:PATH,… or -chardev …,path=PATH,…).
// The -name value is not a claim: another deployment may reuse node names.
type Claim struct {
	UUID  string
	Paths []string
}

// Match is a live process whose argv makes a Claim.
type Match struct {
	PID int
	// Process is its captured tuple; nil when its identity could not be
	// read (it still claims the node: never ignored).
	Process *vmrecord.Process
	// Argv: its argv is byte for byte the invocation's (ArgvHash).
	Argv bool
	// Exact: Argv, and it runs the invocation's binary (RunsBinary):
	// only then is it the node's QEMU. Argv without Exact is another
	// program that mimics the node's command line.
	Exact bool
}

// Table is what one scan of /proc shows for a Claim.
type Table struct {
	Matches []Match // sorted by PID
	// Unreadable lists live processes of this user whose command line could
	// not be read: any of them might make the claim, so a Table with
	// Unreadable entries never proves absence. Other users' processes are
	// not read: QEMU runs as the user who launched it.
	Unreadable []int
}

// Absent reports whether the scan proves that no process claims the node.
func (t Table) Absent() bool { return len(t.Matches) == 0 && len(t.Unreadable) == 0 }

// PIDs lists every claimant and unreadable process of the table, sorted.
func (t Table) PIDs() []int {
	var out []int
	for _, m := range t.Matches {
		out = append(out, m.PID)
	}
	out = append(out, t.Unreadable...)
	sort.Ints(out)
	return out
}

// Sole returns the one process running the invocation exactly when it is
// the only process making the claim, else nil.
func (t Table) Sole() *vmrecord.Process {
	if len(t.Matches) == 1 && len(t.Unreadable) == 0 && t.Matches[0].Exact && t.Matches[0].Process != nil {
		return t.Matches[0].Process
	}
	return nil
}

// Find scans the process table (/proc/<pid>/cmdline of every process of
// this user) for processes whose argv makes claim c, and marks those
// whose argv is exactly inv's and those that, in addition, run inv.Binary
// (Match.Exact). Kernel threads and zombies are skipped.
// It fails only when /proc itself cannot be listed.
func Find(c Claim, inv vmrecord.Invocation) (Table, error) {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return Table{}, fmt.Errorf("listing %s: %w", procRoot, err)
	}
	want := ArgvHash(inv)
	self, uid := os.Getpid(), os.Geteuid()
	var t Table
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 || pid == self {
			continue
		}
		argv, err := readCmdline(pid)
		switch {
		case errors.Is(err, ErrNoProcess):
			continue // gone, a zombie, or a kernel thread
		case err != nil:
			if owner(pid) == uid {
				t.Unreadable = append(t.Unreadable, pid)
			}
			continue
		}
		if !c.madeBy(argv) {
			continue
		}
		m := Match{PID: pid}
		p, err := Capture(pid)
		if errors.Is(err, ErrNoProcess) || errors.Is(err, errExiting) {
			continue // as readCmdline: a process being torn down claims nothing
		}
		if err == nil {
			m.Process, m.Argv = &p, p.ArgvHash == want
			m.Exact = m.Argv && RunsBinary(p, inv.Binary)
		}
		t.Matches = append(t.Matches, m)
	}
	sort.Slice(t.Matches, func(i, j int) bool { return t.Matches[i].PID < t.Matches[j].PID })
	return t, nil
}

// readCmdline returns pid's argv. ErrNoProcess (wrapped) means gone, a
// zombie (every thread of it) or a kernel thread. A main thread that has
// exited while others run has an empty command line: the argv is read
// through a live thread. An empty command line of a live process of this
// user (caught inside execve, or its threads still exiting) is retried
// for up to 2 s and then an error; of another user's, an error at once.
func readCmdline(pid int) ([]string, error) {
	uid := os.Geteuid()
	for i := 0; ; i++ {
		b, err := os.ReadFile(fmt.Sprintf("%s/%d/cmdline", procRoot, pid))
		if err != nil {
			return nil, procErr(pid, "cmdline", err)
		}
		if len(b) == 0 {
			st, err := readStat(pid)
			if err != nil {
				return nil, err
			}
			if st.kernel || st.gone() {
				return nil, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
			}
			if st.ended() {
				b = liveThreadCmdline(pid)
			}
		}
		if len(b) > 0 {
			return strings.Split(string(bytes.TrimSuffix(b, []byte{0})), "\x00"), nil
		}
		if i == 400 || owner(pid) != uid { // 2 s: an exec of a large binary on a loaded host
			return nil, fmt.Errorf("pid %d has an empty command line", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// liveThreadCmdline is the command line of process pid as its first live
// thread other than the main one reads it (/proc/<pid>/task/<tid>), or
// nil.
func liveThreadCmdline(pid int) []byte {
	tasks, _ := os.ReadDir(fmt.Sprintf("%s/%d/task", procRoot, pid))
	for _, t := range tasks {
		dir := fmt.Sprintf("%s/%d/task/%s", procRoot, pid, t.Name())
		st, err := os.ReadFile(dir + "/stat")
		if err != nil {
			continue
		}
		if ts, err := parseStat(pid, st); err != nil || ts.ended() {
			continue
		}
		if b, err := os.ReadFile(dir + "/cmdline"); err == nil && len(b) > 0 {
			return b
		}
	}
	return nil
}

// owner is the uid owning /proc/<pid> (-1 when unknown).
func owner(pid int) int {
	fi, err := os.Stat(fmt.Sprintf("%s/%d", procRoot, pid))
	if err != nil {
		return -1
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// madeBy reports whether argv makes the claim: "-uuid UUID" (any case),
// or a runtime path as the value of -pidfile, as a -qmp unix: path, or as
// a path= option of -chardev.
func (c Claim) madeBy(argv []string) bool {
	path := map[string]bool{}
	for _, p := range c.Paths {
		if p != "" {
			path[p] = true
		}
	}
	for i := 0; i+1 < len(argv); i++ {
		flag, v := argv[i], argv[i+1]
		switch flag {
		case "-uuid":
			if c.UUID != "" && strings.EqualFold(v, c.UUID) {
				return true
			}
		case "-pidfile":
			if path[v] {
				return true
			}
		case "-qmp", "-chardev", "-mon", "-monitor", "-serial":
			for _, opt := range strings.Split(strings.ReplaceAll(v, ",,", "\x00"), ",") {
				opt = strings.ReplaceAll(opt, "\x00", ",")
				for _, prefix := range []string{"unix:", "path="} {
					if p, ok := strings.CutPrefix(opt, prefix); ok && path[p] {
						return true
					}
				}
			}
		}
	}
	return false
}
