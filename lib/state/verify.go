package state

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"barn.dev/lib/exitcode"
)

// Verify checks everything under the state root without modifying
// anything: the root and every directory, including those of the image
// cache and the retained-disk store (real directories, owned, mode 0700), every document (mode 0600, owner, strict schema,
// hashes, the journal allowlist), lock holder records, the event log, and
// unexpected entries in node directories. It returns every problem found,
// sorted by file; an empty list means the state root is sound (a missing
// root is sound: there is nothing to check).
func (r *Root) Verify() []Problem {
	var out []Problem
	add := func(err error) {
		if err == nil {
			return
		}
		var p Problem
		e := exitcode.As(err)
		if d, ok := e.Detail.(Problem); ok {
			p = d
		} else {
			p = Problem{File: r.Dir, Class: e.Class, Message: e.Message}
		}
		if p.Next == "" && e.Next != verifyHint {
			p.Next = e.Next
		}
		out = append(out, p)
	}
	if err := r.checkDir(r.Dir, true); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			add(err)
		}
		return sortProblems(out)
	}
	_, err := r.ReadDeployment()
	add(err)

	for _, d := range []string{LocksDirName, KeysDirName, DisksDirName, ImagesDirName, RunDirName} {
		if err := r.checkDir(filepath.Join(r.Dir, d), false); err != nil && !errors.Is(err, fs.ErrNotExist) {
			add(err)
		}
	}
	// Every directory below the image cache and the retained-disk store
	// too (<family>, trust, manifests, local; disks/<node>/<disk>).
	for _, d := range []string{DisksDirName, ImagesDirName} {
		for _, err := range r.checkSubdirs(filepath.Join(r.Dir, d)) {
			add(err)
		}
	}
	names, err := r.LockNames()
	add(err)
	for _, n := range names {
		_, err := r.Holder(n)
		add(err)
	}
	_, err = r.readEvents(0, EventFilter{}, func(Event) error { return nil })
	add(err)

	nodes, err := r.NodeNames()
	if err != nil {
		add(err)
		// Keep going over the entries that are valid node directories.
		nodes = r.plausibleNodes()
	}
	for _, node := range nodes {
		out = append(out, r.verifyNode(node)...)
	}
	return sortProblems(out)
}

// checkSubdirs checks every directory strictly below top (0700, owned,
// real), without following symlinks.
func (r *Root) checkSubdirs(top string) []error {
	var errs []error
	_ = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p != top {
				errs = append(errs, integrity(p, "unreadable: %v", unwrapPath(err)))
			}
			return nil
		}
		if p == top || !d.IsDir() {
			return nil
		}
		if err := r.checkDir(p, false); err != nil {
			errs = append(errs, err)
			return filepath.SkipDir
		}
		return nil
	})
	return errs
}

func (r *Root) plausibleNodes() []string {
	entries, _ := os.ReadDir(r.NodesDir())
	var out []string
	for _, e := range entries {
		if ValidNodeName(e.Name()) && e.IsDir() && e.Type()&fs.ModeSymlink == 0 {
			out = append(out, e.Name())
		}
	}
	return out
}

func (r *Root) verifyNode(node string) []Problem {
	var out []Problem
	add := func(err error) {
		if err == nil {
			return
		}
		e := exitcode.As(err)
		if d, ok := e.Detail.(Problem); ok {
			out = append(out, d)
		} else {
			out = append(out, Problem{File: r.NodeDir(node), Class: e.Class, Message: e.Message})
		}
	}
	dir := r.NodeDir(node)
	if err := r.checkDir(dir, false); err != nil {
		add(err)
		return out
	}
	_, err := r.ReadNode(node)
	add(err)
	j, err := r.ReadJournal(node)
	add(err)
	_, err = r.ReadTransaction(node)
	add(err)
	entries, err := os.ReadDir(dir)
	if err != nil {
		add(integrity(dir, "unreadable: %v", err))
		return out
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if !IsNodeFileName(e.Name()) {
			if j != nil && IsOperationFile(e.Name(), j.OperationID) {
				add(integrity(p, "staging file of the unfinished create journaled in %s; the next apply or destroy of the node rolls it back", JournalName))
			} else if isTempName(e.Name()) {
				add(integrity(p, "temporary file left by an interrupted atomic write; the document beside it is intact"))
			} else {
				add(integrity(p, "unexpected entry in a node directory (not in the state layout)"))
			}
			continue
		}
		switch e.Name() {
		case NodeStateName, JournalName, TransactionName:
			continue // checked by the strict readers
		}
		fi, err := os.Lstat(p)
		if err != nil {
			add(integrity(p, "unreadable: %v", unwrapPath(err)))
			continue
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			add(integrity(p, "is a symlink; node artifacts must be regular files"))
		case !fi.Mode().IsRegular():
			add(integrity(p, "is not a regular file"))
		case ownerOf(fi) != r.uid:
			add(integrity(p, "is owned by uid %d, not by this user (uid %d)", ownerOf(fi), r.uid))
		case fi.Mode().Perm()&0o022 != 0:
			add(integrity(p, "has mode %04o; it must not be group- or world-writable", fi.Mode().Perm()))
		}
	}
	return out
}

func sortProblems(p []Problem) []Problem {
	if p == nil {
		return []Problem{}
	}
	sort.SliceStable(p, func(i, j int) bool { return p[i].File < p[j].File })
	return p
}

// isTempName reports whether name looks like WriteFileAtomic's temporary
// file for a node document (".<name><digits>").
func isTempName(name string) bool { return tempBase(name) != "" }

// tempBase is the node document whose temporary file name is, or "".
func tempBase(name string) string {
	for _, base := range []string{NodeStateName, JournalName, TransactionName} {
		if rest, ok := strings.CutPrefix(name, "."+base); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
			return base
		}
	}
	return ""
}
