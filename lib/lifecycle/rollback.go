package lifecycle

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"barn.dev/lib/disk"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/fileid"
	"barn.dev/lib/safefile"
	"barn.dev/lib/state"
)

// recovery is what settling a node directory found.
type recovery struct {
	Committed  *state.Node // committed state (a stale journal beside it was settled)
	RolledBack []string    // artifacts removed, in removal order
	Returned   []string    // reattached disks moved back to the retained store ("<node>/<disk>")
}

// recovered reports what a settle or rollback did in the result: removed
// artifacts as rolled back, returned disks as retained.
func (r *Result) recovered(rec *recovery) {
	if rec == nil {
		return
	}
	r.rolledBack(rec.RolledBack...)
	for _, d := range rec.Returned {
		r.retained(d)
	}
}

// settle brings a node directory to a known state before a create:
//   - committed state wins: a journal beside it is stale; the markers of
//     the disks it reattached (which the state now records) are released
//     and the journal removed (a committed node is never rolled back);
//   - an uncommitted journal is rolled back whatever the node's desired
//     definition is now (see rollback);
//   - anything else is left alone and reported.
func (m *Manager) settle(name string) (*recovery, error) {
	docs, err := m.Root.ReadNodeDocuments(name)
	if err != nil {
		if _, jerr := m.Root.ReadJournal(name); jerr != nil {
			return nil, exitcode.As(jerr).WithNext("move " + m.Root.NodeFile(name, state.JournalName) + " away after checking the node directory, then " + m.applyAgain())
		}
		return nil, err
	}
	n, j := docs.State, docs.Journal
	if n != nil {
		if j != nil {
			m.logf("%s: settling a stale prepare journal beside committed state", name)
			if err := m.finishCommitted(n, j); err != nil {
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
	rec, err := m.rollback(name, j)
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// committedStateMissing is the error for a node whose prepare journal says
// its state was committed while the state file is gone: damaged evidence
// (integrity), never rolled back or recreated over.
func (m *Manager) committedStateMissing(name string) error {
	path := m.Root.NodeFile(name, state.NodeStateName)
	return exitcode.New(exitcode.Integrity, "%s: the prepare journal says state was committed but %s is missing; not rolling back", name, path).
		WithReason("journal_committed").WithNext(state.RestoreHint(path))
}

// rollback undoes an uncommitted create from its write-ahead journal, in
// reverse order: a reattached disk is moved back beside the ownership
// marker that stayed in the retained store; every other artifact is
// removed; then the operation's staging and temporary files, the journal
// and the emptied node directory. Only what the journal proves is Barn's
// is touched:
//   - a completed artifact while it is the file Barn published (the
//     identity its entry records; an entry from before Barn kept
//     identities proves nothing);
//   - the intent's file only when it is the same file as its staging name
//     (created under a name carrying this operation's id, then linked);
//     absent, it was never created and nothing is done;
//   - files whose names carry the operation id (staging and the
//     temporary files written beside them);
//   - a document temporary left by an interrupted atomic write only when
//     it decodes as this operation's journal or this VM's state.
//
// It refuses, removing nothing, when state is committed, when the runtime
// QMP socket or pidfile exists, when the directory holds anything else, or
// when a reattached disk can be found neither in the node directory nor in
// the store.
func (m *Manager) rollback(name string, j *state.Journal) (*recovery, error) {
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
	// Newest first: the intent, then the completed artifacts in reverse.
	var undo []state.Artifact
	if j.Intent != nil {
		undo = append(undo, *j.Intent)
	}
	for i := len(j.Completed) - 1; i >= 0; i-- {
		undo = append(undo, j.Completed[i])
	}
	named := map[string]bool{state.JournalName: true}
	for _, a := range undo {
		if filepath.Dir(a.Path) != dir {
			return nil, exitcode.New(exitcode.Integrity, "%s: journaled artifact %s is outside %s", name, a.Path, dir).WithReason("journal_path_outside")
		}
		named[filepath.Base(a.Path)] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "reading %s", dir)
	}
	var leftovers, unexpected []string
	for _, e := range entries {
		switch {
		case named[e.Name()]:
		case state.IsOperationFile(e.Name(), j.OperationID) || m.ownDocumentTemp(name, e.Name(), j):
			leftovers = append(leftovers, filepath.Join(dir, e.Name()))
		default:
			unexpected = append(unexpected, e.Name())
		}
	}
	if in := j.Intent; in != nil && in.Retained == "" {
		if _, err := os.Lstat(in.Path); err == nil && !safefile.SameFile(state.StagingName(in.Path, j.OperationID), in.Path) {
			unexpected = append(unexpected, filepath.Base(in.Path)+" (not the file this create published)")
		}
	}
	for _, a := range j.Completed {
		why, err := notPublished(a)
		if err != nil {
			return nil, err
		}
		if why != "" {
			unexpected = append(unexpected, filepath.Base(a.Path)+" ("+why+")")
		}
	}
	if len(unexpected) > 0 {
		sort.Strings(unexpected)
		return nil, exitcode.New(exitcode.Conflict, "%s: %s holds files the prepare journal does not prove are Barn's (%s); nothing was removed", name, dir, strings.Join(unexpected, ", ")).
			WithReason("unexpected_files").WithNext("move them out of " + dir + ", then " + m.applyAgain())
	}
	// Every reattached disk must be found, lent from its store or already
	// back in it, before anything moves.
	for _, a := range undo {
		if a.Retained == "" {
			continue
		}
		if err := checkReturnable(a); err != nil {
			return nil, err
		}
	}
	rec := &recovery{RolledBack: []string{}}
	for _, a := range undo {
		fi, err := os.Lstat(a.Path)
		if os.IsNotExist(err) {
			continue // never created, never moved, or already undone
		} else if err != nil {
			return rec, exitcode.Wrap(exitcode.Runtime, err, "checking %s", a.Path)
		}
		if !fi.Mode().IsRegular() {
			return rec, exitcode.New(exitcode.Integrity, "%s is not a regular file (%s); not removing it", a.Path, fi.Mode()).WithReason("unexpected_files")
		}
		if a.Retained != "" {
			if err := disk.Return(a.Path, a.Retained); err != nil {
				return rec, err
			}
			rec.Returned = append(rec.Returned, name+"/"+filepath.Base(a.Retained))
			m.logf("%s: returned reattached disk %s to %s", name, a.Path, a.Retained)
			continue
		}
		// The intent is proven by its staging link (above); a completed
		// artifact by its identity, checked again as it is removed.
		if a.ID == nil {
			err = safefile.Remove(a.Path)
		} else if why, rerr := a.ID.Remove(a.Path); rerr != nil {
			err = rerr
		} else if why != "" {
			return rec, exitcode.New(exitcode.Conflict, "%s is not the file this create published (%s); it was kept", a.Path, why).
				WithReason("unexpected_files").WithNext("move it out of " + dir + ", then " + m.applyAgain())
		}
		if err != nil {
			return rec, exitcode.Wrap(exitcode.Runtime, err, "removing %s", a.Path)
		}
		rec.RolledBack = append(rec.RolledBack, a.Path)
	}
	for _, t := range leftovers {
		if err := safefile.Remove(t); err != nil {
			return rec, exitcode.Wrap(exitcode.Runtime, err, "removing %s", t)
		}
	}
	if err := m.Root.RemoveJournal(name); err != nil {
		return rec, err
	}
	if err := syscall.Rmdir(dir); err != nil && !os.IsNotExist(err) {
		return rec, exitcode.Wrap(exitcode.Runtime, err, "removing %s", dir)
	}
	m.logf("%s: rolled back an unfinished create (%d artifact(s) removed, %d disk(s) returned)", name, len(rec.RolledBack), len(rec.Returned))
	return rec, nil
}

// notPublished returns why the file at a completed artifact's path is not
// the one the entry records ("" when it is, or when nothing is there). A
// reattached disk without an identity (its marker predates them) is moved
// back as before: moving is not deleting, and Return checks the marker.
func notPublished(a state.Artifact) (string, error) {
	if a.ID == nil {
		if _, err := os.Lstat(a.Path); os.IsNotExist(err) || a.Retained != "" {
			return "", nil
		}
		return "journaled before Barn kept file identities, so nothing proves it is the file this create published", nil
	}
	why, err := a.ID.Differs(a.Path)
	if fileid.Missing(err) {
		return "", nil
	} else if err != nil {
		return "", exitcode.Wrap(exitcode.Runtime, err, "checking %s", a.Path)
	}
	if why != "" {
		return "not the file this create published: " + why, nil
	}
	return "", nil
}

// checkReturnable proves a reattached disk a is accounted for: either at
// its node path with its store directory holding the marker it was lent
// under, or (never moved, or already returned) back in the store.
func checkReturnable(a state.Artifact) error {
	lent, err := disk.Lent(a.Retained)
	if err != nil && exitcode.As(err).Reason != "retained_disk_lent" {
		return err
	}
	_, perr := os.Lstat(a.Path)
	here := perr == nil
	switch {
	case here && lent:
		return nil
	case !here && !lent:
		if m, err := disk.ReadRetained(a.Retained); err != nil || m == nil {
			return exitcode.New(exitcode.Integrity, "reattached disk %s is neither in the node directory nor in %s; nothing was removed", a.Path, a.Retained).
				WithReason("persistent_disk_missing")
		}
		return nil
	case here:
		return exitcode.New(exitcode.Conflict, "%s exists but %s holds no lent disk's marker; not moving it", a.Path, a.Retained).
			WithReason("unexpected_files").WithNext("move " + a.Path + " away after checking it, then retry")
	default:
		return exitcode.New(exitcode.Integrity, "reattached disk %s is missing; its marker stays in %s; nothing was removed", a.Path, a.Retained).
			WithReason("persistent_disk_missing")
	}
}

// ownDocumentTemp reports whether name is a temporary file an interrupted
// atomic write of this create left: it must decode as this operation's
// journal or as the state of this create's VM. An empty or cut-short one
// proves nothing and is not Barn's to remove.
func (m *Manager) ownDocumentTemp(node, name string, j *state.Journal) bool {
	d, err := m.Root.ReadInterruptedWrite(node, name)
	if err != nil {
		return false
	}
	return d.Journal != nil && d.Journal.OperationID == j.OperationID || d.State != nil && d.State.VMUUID == j.VMUUID
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
