package lifecycle

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/state"
)

// recovery is what settling a node directory found.
type recovery struct {
	Committed  *state.Node // committed state (a stale journal beside it was dropped)
	RolledBack []string    // artifacts removed, in removal order
}

// settle brings a node directory to a known state before a create:
//   - committed state wins: a journal beside it is stale and only the
//     journal is removed (a committed node is never rolled back);
//   - an uncommitted journal is rolled back whatever the node's desired
//     definition is now, but only when no runtime socket or pidfile exists
//     and the directory holds nothing but the journal, its completed
//     artifacts and their in-flight temporary files;
//   - anything else is left alone and reported.
func (m *Manager) settle(name string) (*recovery, error) {
	n, err := m.Root.ReadNode(name)
	if err != nil {
		return nil, err
	}
	j, err := m.Root.ReadJournal(name)
	if err != nil {
		return nil, exitcode.As(err).WithNext("move " + m.Root.NodeFile(name, state.JournalName) + " away after checking the node directory, then " + m.applyAgain())
	}
	if n != nil {
		if j != nil {
			m.logf("%s: removing a stale prepare journal beside committed state", name)
			if err := m.Root.RemoveJournal(name); err != nil {
				return nil, err
			}
		}
		return &recovery{Committed: n}, nil
	}
	if j == nil {
		if _, err := m.dropFinishedDestroy(name); err != nil {
			return nil, err
		}
		dir := m.Root.NodeDir(name)
		entries, err := os.ReadDir(dir)
		if os.IsNotExist(err) {
			return &recovery{}, nil
		} else if err != nil {
			return nil, exitcode.Wrap(exitcode.Runtime, err, "reading %s", dir)
		}
		if len(entries) == 0 {
			return &recovery{}, nil
		}
		return nil, expectEmptyNodeDir(dir)
	}
	removed, err := m.rollback(name, j)
	if err != nil {
		return nil, err
	}
	return &recovery{RolledBack: removed}, nil
}

// committedStateMissing is the error for a node whose prepare journal says
// its state was committed while the state file is gone: damaged evidence
// (integrity), never rolled back or recreated over.
func (m *Manager) committedStateMissing(name string) error {
	path := m.Root.NodeFile(name, state.NodeStateName)
	return exitcode.New(exitcode.Integrity, "%s: the prepare journal says state was committed but %s is missing; not rolling back", name, path).
		WithReason("journal_committed").WithNext(state.RestoreHint(path))
}

// rollback removes only the journal's completed artifacts, in reverse
// order, then the journal and the emptied node directory. It refuses when
// state is committed, when the runtime QMP socket or pidfile exists, or
// when the directory holds an unexpected file.
func (m *Manager) rollback(name string, j *state.Journal) ([]string, error) {
	dir := m.Root.NodeDir(name)
	if j.StateCommitted {
		return nil, m.committedStateMissing(name)
	}
	// The runtime paths of the journal's own typed invocation, and those
	// this environment would use: a socket or pidfile at either means a VM
	// may run from this unfinished create. Unknowable paths fail closed.
	rt, err := m.Root.NodeRuntime(name)
	if err != nil {
		// The cause's own hint (status would only come back here).
		return nil, exitcode.Wrap(exitcode.ClassOf(err), err, "%s: cannot tell whether a VM runs from this unfinished create", name).
			WithReason("runtime_unknown").WithNext(exitcode.As(err).Next)
	}
	paths := append(rt.Sockets(), rt.Pidfile)
	if j.Invocation != nil {
		paths = append(paths, invocationRuntimePaths(j.Invocation.Args)...)
	}
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			return nil, exitcode.New(exitcode.Conflict, "%s: runtime file %s exists; a VM may be running from this unfinished create", name, p).
				WithReason("runtime_present").WithNext("remove " + p + " once no QEMU uses it (fuser " + p + "), then " + m.applyAgain())
		}
	}
	allowed := map[string]bool{state.JournalName: true}
	for _, a := range j.Completed {
		if filepath.Dir(a.Path) != dir {
			return nil, exitcode.New(exitcode.Integrity, "%s: journaled artifact %s is outside %s", name, a.Path, dir).WithReason("journal_path_outside")
		}
		allowed[filepath.Base(a.Path)] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "reading %s", dir)
	}
	var temps, unexpected []string
	for _, e := range entries {
		switch {
		case allowed[e.Name()]:
		case isOurTemp(e.Name()):
			temps = append(temps, filepath.Join(dir, e.Name()))
		default:
			unexpected = append(unexpected, e.Name())
		}
	}
	if len(unexpected) > 0 {
		sort.Strings(unexpected)
		return nil, exitcode.New(exitcode.Conflict, "%s: %s holds files the prepare journal does not list (%s); nothing was removed", name, dir, strings.Join(unexpected, ", ")).
			WithReason("unexpected_files").WithNext("move them out of " + dir + ", then " + m.applyAgain())
	}
	removed := []string{}
	for i := len(j.Completed) - 1; i >= 0; i-- {
		p := j.Completed[i].Path
		fi, err := os.Lstat(p)
		if os.IsNotExist(err) {
			continue
		} else if err != nil {
			return removed, exitcode.Wrap(exitcode.Runtime, err, "checking %s", p)
		}
		if !fi.Mode().IsRegular() {
			return removed, exitcode.New(exitcode.Integrity, "%s is not a regular file (%s); not removing it", p, fi.Mode()).WithReason("unexpected_files")
		}
		if err := os.Remove(p); err != nil {
			return removed, exitcode.Wrap(exitcode.Runtime, err, "removing %s", p)
		}
		removed = append(removed, p)
	}
	for _, t := range temps {
		if err := os.Remove(t); err != nil && !os.IsNotExist(err) {
			return removed, exitcode.Wrap(exitcode.Runtime, err, "removing %s", t)
		}
	}
	if err := m.Root.RemoveJournal(name); err != nil {
		return removed, err
	}
	if err := syscall.Rmdir(dir); err != nil && !os.IsNotExist(err) {
		return removed, exitcode.Wrap(exitcode.Runtime, err, "removing %s", dir)
	}
	m.logf("%s: rolled back an unfinished create (%d artifact(s))", name, len(removed))
	return removed, nil
}

// isOurTemp reports whether name is an in-flight temporary file Barn writes
// next to an allowlisted node file: ".<name>.tmp-…" (disk and seed
// writes) or ".<name><digits>" (renameio, used by lib/state's atomic
// writes).
func isOurTemp(name string) bool {
	if !strings.HasPrefix(name, ".") {
		return false
	}
	if base, _, ok := strings.Cut(name[1:], ".tmp"); ok && state.IsNodeFileName(base) {
		return true
	}
	base := strings.TrimRight(name[1:], "0123456789")
	return base != name[1:] && state.IsNodeFileName(base)
}

// invocationRuntimePaths returns the QMP sockets (-qmp unix:PATH,... and
// -chardev socket,...,path=PATH,...) and pidfile (-pidfile PATH) named by
// a typed QEMU invocation.
func invocationRuntimePaths(args []string) []string {
	var out []string
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "-pidfile":
			out = append(out, args[i+1])
		case "-qmp":
			if v, ok := strings.CutPrefix(args[i+1], "unix:"); ok {
				path, _, _ := strings.Cut(v, ",")
				out = append(out, path)
			}
		case "-chardev":
			if v, ok := strings.CutPrefix(args[i+1], "socket,"); ok {
				for _, opt := range strings.Split(v, ",") {
					if path, ok := strings.CutPrefix(opt, "path="); ok {
						out = append(out, path)
					}
				}
			}
		}
	}
	return out
}
