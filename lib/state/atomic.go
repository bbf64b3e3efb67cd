package state

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"

	"barn.dev/lib/exitcode"
)

// WriteFileAtomic replaces path with data so that a crash at any point
// leaves either the old file or the new one, never a torn file:
// a temporary file with a random name in the same directory
// (".<name><random>", created O_EXCL with mode) is written, fsynced and
// renamed over path, then the parent directory is fsynced (renameio does
// not). mode is applied exactly, ignoring the umask (state files use 0600).
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
	t, err := renameio.NewPendingFile(path, renameio.WithTempDir(parent), renameio.WithStaticPermissions(mode.Perm()))
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "writing %s", path)
	}
	defer func() { _ = t.Cleanup() }()
	if _, err := t.Write(data); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "writing %s", path)
	}
	if err := t.CloseAtomicallyReplace(); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "writing %s", path)
	}
	if err := syncDir(parent); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "syncing %s after writing %s", parent, filepath.Base(path))
	}
	return nil
}

// RemoveFileDurable removes path (never following a symlink: a symlink is
// removed itself) and fsyncs its parent directory. A missing file is not
// an error.
func RemoveFileDurable(path string) error {
	if err := os.Remove(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return exitcode.Wrap(exitcode.Runtime, err, "removing %s", path)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "syncing %s after removing %s", filepath.Dir(path), filepath.Base(path))
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
