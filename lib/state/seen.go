package state

import (
	"errors"
	"io/fs"
	"os"
	"sync"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/fileid"
)

// seenIDs is the identity (lib/fileid) of each state document this Root
// last read or wrote, by path: what removeSeen deletes it by.
type seenIDs struct {
	mu  sync.Mutex
	ids map[string]fileid.ID
}

func (r *Root) remember(path string, id fileid.ID) {
	r.seen.mu.Lock()
	defer r.seen.mu.Unlock()
	if r.seen.ids == nil {
		r.seen.ids = map[string]fileid.ID{}
	}
	r.seen.ids[path] = id
}

func (r *Root) seenID(path string) (fileid.ID, bool) {
	r.seen.mu.Lock()
	defer r.seen.mu.Unlock()
	id, ok := r.seen.ids[path]
	return id, ok
}

// rememberWritten records the identity of the document just written at
// path (the caller holds the lock that serialises its writers).
func (r *Root) rememberWritten(path string) error {
	id, err := fileid.Of(path)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "reading back %s", path)
	}
	r.remember(path, id)
	return nil
}

// removeSeen deletes the state document at path only while it is the file
// this Root last read or wrote there (fileid.Remove); an absent file is
// fine. A file this Root never loaded, or another file now at path (a
// copy, a restore), is kept: integrity, naming it.
func (r *Root) removeSeen(path string) error {
	id, ok := r.seenID(path)
	if !ok {
		if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return integrity(path, "was not read by this command, so nothing proves which file it is; it was kept").WithNext("barn-state verify")
	}
	why, err := id.Remove(path)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "removing %s", path)
	}
	if why != "" {
		return integrity(path, "is not the file Barn read (%s); it was kept", why).WithNext("barn-state verify")
	}
	r.seen.mu.Lock()
	delete(r.seen.ids, path)
	r.seen.mu.Unlock()
	return nil
}
