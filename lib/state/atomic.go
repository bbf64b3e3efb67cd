package state

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/safefile"
)

// WriteFileAtomic replaces path with data through safefile.Write (Barn's
// one atomic write: a same-directory temporary file ".<name><random>",
// fsync, rename, directory fsync), so a crash at any point leaves either
// the old file or the new one, never a torn file. mode is applied exactly,
// ignoring the umask (state files use 0600).
//
// It refuses (integrity, 7) a symlink or non-regular file at path and a
// parent that is a symlink or not a directory; a missing parent is a
// runtime error (1).
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	path = filepath.Clean(path)
	parent := filepath.Dir(path)
	pi, err := os.Lstat(parent)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "writing %s", path)
	}
	if pi.Mode()&fs.ModeSymlink != 0 || !pi.IsDir() {
		return integrity(path, "parent %s is not a real directory; refusing to write", parent)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&fs.ModeSymlink != 0 {
			return integrity(path, "is a symlink; refusing to write through it")
		}
		if !fi.Mode().IsRegular() {
			return integrity(path, "is not a regular file; refusing to replace it")
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return exitcode.Wrap(exitcode.Runtime, err, "writing %s", path)
	}
	if err := safefile.Write(path, data, mode); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "writing %s", path)
	}
	return nil
}

// RemoveFileDurable removes path (never following a symlink: a symlink is
// removed itself) and fsyncs its parent directory. A missing file is not
// an error.
func RemoveFileDurable(path string) error {
	if err := safefile.Remove(path); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "removing %s", path)
	}
	return nil
}

// EnsurePrivateDir creates each of dirs in turn (0700, through
// safefile.PrivateDir) and checks it, created or found: a directory under
// the state root that is a symlink, owned by another user or open to group
// or world is the integrity error (7) naming it — never quietly accepted
// or changed. Other failures are runtime errors.
func EnsurePrivateDir(dirs ...string) error {
	for _, d := range dirs {
		if err := safefile.PrivateDir(d); err != nil {
			if errors.Is(err, safefile.ErrUnsafeDir) {
				return integrity(d, "%v", err).WithNext("chmod 0700 " + d)
			}
			return exitcode.Wrap(exitcode.Runtime, err, "creating %s", d)
		}
	}
	return nil
}
