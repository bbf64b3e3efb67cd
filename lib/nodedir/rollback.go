package nodedir

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"barn.dev/lib/disk"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/fileid"
	"barn.dev/lib/state"
)

// Recovery is what settling a node directory found or did.
type Recovery struct {
	Committed  *state.Node // committed state (a stale journal beside it was settled)
	RolledBack []string    // artifacts removed, in removal order
	Returned   []string    // reattached disks moved back to the retained store ("<node>/<disk>")
}

// Settle brings node's directory to a known state before a create:
//   - committed state wins: a journal beside it is stale; the markers of
//     the disks it reattached (which the state now records) are released
//     and the journal removed (a committed node is never rolled back);
//   - an uncommitted journal is rolled back (Rollback);
//   - a finished destroy's leftover record is removed;
//   - anything else left in the directory is a conflict (reason
//     unfinished_node_directory).
func (s *Store) Settle(node string) (*Recovery, error) {
	docs, err := s.Root.ReadNodeDocuments(node)
	if err != nil {
		if _, jerr := s.Root.ReadJournal(node); jerr != nil && exitcode.As(jerr).Reason != state.EarlierBuildReason {
			return nil, exitcode.As(jerr).WithNext("move " + s.Root.NodeFile(node, state.JournalName) + " away after checking the node directory, then " + s.again())
		}
		return nil, err
	}
	if n, j := docs.State, docs.Journal; n != nil {
		if j != nil {
			s.logf("%s: settling a stale prepare journal beside committed state", node)
			if err := s.FinishCommitted(n, j); err != nil {
				return nil, err
			}
		}
		return &Recovery{Committed: n}, nil
	} else if j != nil {
		return s.Rollback(node, j)
	}
	if _, err := s.DropFinishedDestroy(node); err != nil {
		return nil, err
	}
	dir := s.Root.NodeDir(node)
	if _, err := os.Lstat(dir); os.IsNotExist(err) {
		return &Recovery{}, nil
	}
	return &Recovery{}, expectEmpty(dir)
}

// Rollback undoes the uncommitted create journaled in j, in reverse
// order: a reattached disk is moved back beside the ownership marker that
// stayed in the retained store; every other artifact is removed; then
// the operation's staging and temporary files, the journal and the
// emptied node directory. Only what the journal proves is Barn's is
// touched:
//   - a completed artifact while it is the file Barn published (the
//     identity its entry records);
//   - the intent's file only while it is the identity the intent records
//     (its staging file's, journaled before the file was linked at its
//     path); an intent without one was never linked, and a file at its
//     path is not Barn's;
//   - files whose names carry the operation id (staging and the
//     temporary files written beside them);
//   - a document temporary left by an interrupted atomic write only when
//     it decodes as this operation's journal or this VM's state.
//
// Every removal checks the identity again as it removes (fileid.Remove).
// It refuses, removing nothing, when state is committed (integrity,
// journal_committed), when a runtime QMP socket or pidfile exists
// (conflict, runtime_present), when the directory holds anything else
// (conflict, unexpected_files), or when a reattached disk can be found
// neither in the node directory nor in the store (integrity,
// persistent_disk_missing).
func (s *Store) Rollback(node string, j *state.Journal) (*Recovery, error) {
	if j.StateCommitted {
		return nil, s.CommittedStateMissing(node)
	}
	if err := s.noRuntime(node, j); err != nil {
		return nil, err
	}
	undo := undoOrder(j)
	leftovers, err := s.provenLeftovers(node, j, undo)
	if err != nil {
		return nil, err
	}
	for _, a := range undo {
		if a.Retained != "" {
			if err := checkReturnable(a); err != nil {
				return nil, err
			}
		}
	}
	s.gap("rollback-proven", node)
	rec := &Recovery{RolledBack: []string{}}
	for _, a := range undo {
		if err := s.undo(node, a, rec); err != nil {
			return rec, err
		}
	}
	for _, l := range leftovers {
		if err := s.removeLeftover(node, l); err != nil {
			return rec, err
		}
	}
	if err := s.Root.RemoveJournal(node); err != nil {
		return rec, err
	}
	if err := rmdir(s.Root.NodeDir(node)); err != nil {
		return rec, err
	}
	s.logf("%s: rolled back an unfinished create (%d artifact(s) removed, %d disk(s) returned)", node, len(rec.RolledBack), len(rec.Returned))
	return rec, nil
}

// CommittedStateMissing is the error for a node whose prepare journal
// says its state was committed while the state file is gone: damaged
// evidence (integrity, journal_committed), never rolled back or recreated
// over.
func (s *Store) CommittedStateMissing(node string) error {
	path := s.Root.NodeFile(node, state.NodeStateName)
	return exitcode.New(exitcode.Integrity, "%s: the prepare journal says state was committed but %s is missing; not rolling back", node, path).
		WithReason("journal_committed").WithNext(state.RestoreHint(path))
}

// undoOrder is newest first: the intent, then the completed artifacts in
// reverse.
func undoOrder(j *state.Journal) []state.Artifact {
	var undo []state.Artifact
	if j.Intent != nil {
		undo = append(undo, *j.Intent)
	}
	for i := len(j.Completed) - 1; i >= 0; i-- {
		undo = append(undo, j.Completed[i])
	}
	return undo
}

// noRuntime refuses a rollback while a runtime file of the node exists:
// the runtime paths of the journal's own typed invocation and those this
// environment would use. A socket or pidfile at either means a VM may
// run from this unfinished create; unknowable paths fail closed.
func (s *Store) noRuntime(node string, j *state.Journal) error {
	rt, err := s.Root.NodeRuntime(node)
	if err != nil {
		return exitcode.Wrap(exitcode.ClassOf(err), err, "%s: cannot tell whether a VM runs from this unfinished create", node).
			WithReason("runtime_unknown").WithNext(exitcode.As(err).Next)
	}
	paths := append(rt.Sockets(), rt.Pidfile)
	if j.Invocation != nil {
		paths = append(paths, InvocationRuntimePaths(j.Invocation.Args)...)
	}
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			return exitcode.New(exitcode.Conflict, "%s: runtime file %s exists; a VM may be running from this unfinished create", node, p).
				WithReason("runtime_present").WithNext("remove " + p + " once no QEMU uses it (fuser " + p + "), then " + s.again())
		}
	}
	return nil
}

// leftover is a staging or temporary file the rollback proved is this
// operation's, with the identity it had then: what it is removed by.
type leftover struct {
	path string
	id   fileid.ID
}

// provenLeftovers returns the operation's own staging and temporary
// files in the node directory, refusing (conflict, unexpected_files) any
// entry the journal does not prove is Barn's.
func (s *Store) provenLeftovers(node string, j *state.Journal, undo []state.Artifact) ([]leftover, error) {
	dir := s.Root.NodeDir(node)
	named := map[string]bool{state.JournalName: true}
	for _, a := range undo {
		if filepath.Dir(a.Path) != dir {
			return nil, exitcode.New(exitcode.Integrity, "%s: journaled artifact %s is outside %s", node, a.Path, dir).WithReason("journal_path_outside")
		}
		named[filepath.Base(a.Path)] = true
		named[filepath.Base(fileid.RemovingName(a.Path))] = true // a removal cut short: fileid.Remove finishes it
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "reading %s", dir)
	}
	var leftovers []leftover
	var unexpected []string
	for _, e := range entries {
		if named[e.Name()] {
			continue
		}
		if l, ok := s.ownLeftover(node, filepath.Join(dir, e.Name()), j); ok {
			leftovers = append(leftovers, l)
		} else {
			unexpected = append(unexpected, e.Name())
		}
	}
	for _, a := range undo {
		if a.Retained != "" {
			continue
		}
		if a.ID == nil { // an intent not yet linked: nothing may be at its path
			if _, err := os.Lstat(a.Path); err == nil {
				unexpected = append(unexpected, filepath.Base(a.Path)+" (not the file this create published)")
			}
			continue
		}
		why, err := differs(a.ID, a.Path)
		if err != nil {
			return nil, err
		}
		if why != "" {
			unexpected = append(unexpected, filepath.Base(a.Path)+" (not the file this create published: "+why+")")
		}
	}
	if len(unexpected) > 0 {
		sort.Strings(unexpected)
		return nil, exitcode.New(exitcode.Conflict, "%s: %s holds files the prepare journal does not prove are Barn's (%s); nothing was removed", node, dir, strings.Join(unexpected, ", ")).
			WithReason("unexpected_files").WithNext("move them out of " + dir + ", then " + s.again())
	}
	return leftovers, nil
}

// undo removes one journaled artifact by the identity its entry records
// (for the intent, its staging file's, journaled before the file was
// linked at its path), or moves a reattached disk back to its store;
// nothing is done for one that is not there. An intent without an
// identity was never linked at its path.
func (s *Store) undo(node string, a state.Artifact, rec *Recovery) error {
	if a.Retained != "" {
		return s.undoReattach(node, a, rec)
	}
	if a.ID == nil {
		return nil
	}
	_, lerr := os.Lstat(a.Path)
	why, err := a.ID.Remove(a.Path)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "removing %s", a.Path)
	}
	if why != "" {
		return exitcode.New(exitcode.Conflict, "%s is not the file this create published (%s); it was kept", a.Path, why).
			WithReason("unexpected_files").WithNext("move it out of " + filepath.Dir(a.Path) + ", then " + s.again())
	}
	if lerr == nil {
		rec.RolledBack = append(rec.RolledBack, a.Path)
	}
	return nil
}

// undoReattach moves the reattached disk a back to its store directory;
// nothing is done when it is not in the node directory.
func (s *Store) undoReattach(node string, a state.Artifact, rec *Recovery) error {
	fi, err := os.Lstat(a.Path)
	if os.IsNotExist(err) {
		return nil // never moved, or already returned
	} else if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "checking %s", a.Path)
	}
	if !fi.Mode().IsRegular() {
		return exitcode.New(exitcode.Integrity, "%s is not a regular file (%s); not moving it", a.Path, fi.Mode()).WithReason("unexpected_files")
	}
	if err := disk.Return(a.Path, a.Retained); err != nil {
		return err
	}
	rec.Returned = append(rec.Returned, node+"/"+filepath.Base(a.Retained))
	s.logf("%s: returned reattached disk %s to %s", node, a.Path, a.Retained)
	return nil
}

// differs is why the file at path is not the file id records ("" when it
// is, or when nothing is there).
func differs(id *fileid.ID, path string) (string, error) {
	why, err := id.Differs(path)
	if fileid.Missing(err) {
		return "", nil
	} else if err != nil {
		return "", exitcode.Wrap(exitcode.Runtime, err, "checking %s", path)
	}
	return why, nil
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

// ownLeftover returns the identity of the regular file at path when it
// is this operation's by its name (state.IsOperationFile) or its content
// (ownDocumentTemp; the identity, with the SHA-256 of the bytes, is taken
// before they are decoded, so what is removed is what was read).
func (s *Store) ownLeftover(node, path string, j *state.Journal) (leftover, bool) {
	name := filepath.Base(path)
	if state.IsOperationFile(name, j.OperationID) {
		id, err := fileid.Of(path)
		return leftover{path, id}, err == nil
	}
	id, err := fileid.OfContent(path)
	if err != nil || !s.ownDocumentTemp(node, name, j) {
		return leftover{}, false
	}
	return leftover{path, id}, true
}

// removeLeftover removes l while it is the file proven (fileid.Remove);
// one replaced since is kept (conflict, unexpected_files).
func (s *Store) removeLeftover(node string, l leftover) error {
	why, err := l.id.Remove(l.path)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "removing %s", l.path)
	}
	if why != "" {
		return exitcode.New(exitcode.Conflict, "%s: %s changed after the rollback proved it this create's (%s); it was kept", node, l.path, why).
			WithReason("unexpected_files").WithNext("move " + l.path + " out of " + filepath.Dir(l.path) + ", then " + s.again())
	}
	return nil
}

// ownDocumentTemp reports whether name is a temporary file an interrupted
// atomic write of this create left: it must decode as this operation's
// journal or as the state of this create's VM. An empty or cut-short one
// proves nothing and is not Barn's to remove.
func (s *Store) ownDocumentTemp(node, name string, j *state.Journal) bool {
	d, err := s.Root.ReadInterruptedWrite(node, name)
	if err != nil {
		return false
	}
	return d.Journal != nil && d.Journal.OperationID == j.OperationID || d.State != nil && d.State.VMUUID == j.VMUUID
}

// InvocationRuntimePaths returns the QMP sockets (-qmp unix:PATH,... and
// -chardev socket,...,path=PATH,...) and pidfile (-pidfile PATH) named by
// a typed QEMU invocation's arguments.
func InvocationRuntimePaths(args []string) []string {
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

// expectEmpty refuses a node directory holding anything: recovery
// (rollback or committed state) must have settled it first.
func expectEmpty(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "reading %s", dir)
	}
	if len(entries) > 0 {
		names := make([]string, len(entries))
		for i, e := range entries {
			names[i] = e.Name()
		}
		return exitcode.New(exitcode.Conflict, "unfinished node directory %s holds files without a readable prepare record (%v); move them away, then retry", dir, names).
			WithReason("unfinished_node_directory")
	}
	return nil
}

// rmdir removes dir when it is empty; a missing dir is fine.
func rmdir(dir string) error {
	if err := syscall.Rmdir(dir); err != nil && !os.IsNotExist(err) {
		return exitcode.Wrap(exitcode.Runtime, err, "removing %s", dir)
	}
	return nil
}

func baseName(p string) string { return filepath.Base(p) }
