// Package safefile is how Barn replaces and reads the files it trusts:
// one atomic, durable write for every document, image, seed and config
// Barn publishes, and one read that never follows a symlink and checks the
// file it actually opened rather than the path it looked at first.
//
// An atomic write leaves either the old file or the new one after a crash
// at any point, never a torn or empty file: a temporary file with a random
// name in the target's directory (renameio's ".<name><digits>") is
// written, fsynced, renamed over the target, and then the directory is
// fsynced so the rename itself survives a power loss. A symlink at the
// target is replaced, never written through.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/google/renameio/v2"
	"golang.org/x/sys/unix"
)

// Write atomically and durably replaces path with data. mode is applied
// exactly, ignoring the umask. The directory must exist.
func Write(path string, data []byte, mode os.FileMode) error {
	p, err := Create(path, mode)
	if err != nil {
		return err
	}
	defer p.Cleanup()
	if _, err := p.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return p.Commit()
}

// Pending is the temporary file of an atomic replace whose content is
// streamed (an image, an ISO built in place). Write to it (it is an
// *os.File), then Commit; Cleanup removes it unless committed and is safe
// to defer.
type Pending struct {
	*renameio.PendingFile
	path string
}

// Create starts an atomic replace of path with mode (applied exactly).
func Create(path string, mode os.FileMode) (*Pending, error) {
	path = filepath.Clean(path)
	t, err := renameio.NewPendingFile(path, renameio.WithTempDir(filepath.Dir(path)), renameio.WithStaticPermissions(mode.Perm()))
	if err != nil {
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	return &Pending{PendingFile: t, path: path}, nil
}

// Commit fsyncs the temporary file, renames it over the target and fsyncs
// the directory.
func (p *Pending) Commit() error {
	if err := p.CloseAtomicallyReplace(); err != nil {
		return fmt.Errorf("writing %s: %w", p.path, err)
	}
	if err := SyncDir(filepath.Dir(p.path)); err != nil {
		return fmt.Errorf("writing %s: %w", p.path, err)
	}
	return nil
}

// Cleanup removes the temporary file of an uncommitted replace.
func (p *Pending) Cleanup() error { return p.PendingFile.Cleanup() }

// Remove removes path (a symlink is removed itself, never followed) and
// fsyncs its directory. A missing file is not an error.
func Remove(path string) error {
	if err := os.Remove(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir fsyncs a directory, making renames and removals in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	serr := d.Sync()
	cerr := d.Close()
	if err := errors.Join(serr, cerr); err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}

// ErrNotRegular is returned (wrapped) by Open and ReadFile for a path that
// is a symlink, a directory, a FIFO, a device or a socket.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is returned (wrapped) by ReadFile for a file larger than the
// caller's limit.
var ErrTooLarge = errors.New("larger than the limit")

// Open opens path read-only without following a symlink in its last
// component (O_NOFOLLOW) and without blocking on a FIFO (O_NONBLOCK), and
// returns the file with the FileInfo of the open descriptor: every check a
// caller makes (type, mode, owner, size) is about the bytes it will read,
// not about whatever the path named a moment earlier. A missing file wraps
// fs.ErrNotExist; a symlink or any non-regular file wraps ErrNotRegular.
func Open(path string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, nil, fmt.Errorf("%s: is a symlink: %w", path, ErrNotRegular)
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, ErrNotRegular)
	}
	return f, fi, nil
}

// ReadFile reads at most max bytes of path through Open, after check
// (when non-nil) accepted the opened descriptor's FileInfo. A file larger
// than max wraps ErrTooLarge.
func ReadFile(path string, max int64, check func(fs.FileInfo) error) ([]byte, fs.FileInfo, error) {
	f, fi, err := Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if check != nil {
		if err := check(fi); err != nil {
			return nil, fi, err
		}
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fi, err
	}
	if int64(len(data)) > max {
		return nil, fi, fmt.Errorf("%s: larger than %d bytes: %w", path, max, ErrTooLarge)
	}
	return data, fi, nil
}

// Publish atomically and durably moves a fully written temporary file
// (staging, in dest's directory) to dest: it applies mode, fsyncs the file,
// renames it over dest and fsyncs the directory. It is Commit for content
// that was written elsewhere first, such as a verified, resumable
// download.
func Publish(staging, dest string, mode os.FileMode) error {
	f, err := os.OpenFile(staging, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("publishing %s: %w", dest, err)
	}
	err = errors.Join(f.Chmod(mode.Perm()), f.Sync())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(staging, dest)
	}
	if err == nil {
		err = SyncDir(filepath.Dir(dest))
	}
	if err != nil {
		return fmt.Errorf("publishing %s: %w", dest, err)
	}
	return nil
}

// ErrExists is returned (wrapped) by Move when dst already exists.
var ErrExists = errors.New("destination exists")

// Move renames src to dst (same filesystem) without ever replacing an
// existing dst — renameat2(RENAME_NOREPLACE) on Linux, renamex_np
// (RENAME_EXCL) on macOS, decides atomically, so there is no window between a check and the rename — and fsyncs both
// directories. A dst that exists wraps ErrExists; a src that does not
// wraps fs.ErrNotExist.
func Move(src, dst string) error {
	if err := renameNoReplace(src, dst); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("moving %s to %s: %w", src, dst, ErrExists)
		}
		return &os.LinkError{Op: "move", Old: src, New: dst, Err: err}
	}
	if err := SyncDir(filepath.Dir(src)); err != nil {
		return err
	}
	if filepath.Dir(dst) != filepath.Dir(src) {
		return SyncDir(filepath.Dir(dst))
	}
	return nil
}

// PublishNew is Publish that never replaces: it applies mode, fsyncs
// staging and renames it to dest only when dest does not exist
// (renameat2(RENAME_NOREPLACE): no window between a check and the
// rename), then fsyncs the directory. A dest that exists wraps ErrExists
// and staging stays where it was.
func PublishNew(staging, dest string, mode os.FileMode) error {
	if err := syncWithMode(staging, mode); err != nil {
		return fmt.Errorf("publishing %s: %w", dest, err)
	}
	if err := Move(staging, dest); err != nil {
		return fmt.Errorf("publishing %s: %w", dest, err)
	}
	return nil
}

// LinkNew gives the fully written file src (in dest's directory) a second
// name, dest, without ever replacing an existing dest (a dest that exists
// wraps ErrExists), after applying mode and fsyncing src; then it fsyncs
// the directory. src keeps its name; the caller removes it once the
// publication is recorded.
func LinkNew(src, dest string, mode os.FileMode) error {
	if err := syncWithMode(src, mode); err != nil {
		return fmt.Errorf("publishing %s: %w", dest, err)
	}
	if err := os.Link(src, dest); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("publishing %s: %w", dest, ErrExists)
		}
		return fmt.Errorf("publishing %s: %w", dest, err)
	}
	return SyncDir(filepath.Dir(dest))
}

func syncWithMode(path string, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	err = errors.Join(f.Chmod(mode.Perm()), f.Sync())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ErrUnsafeDir is returned (wrapped) by PrivateDir for a path that is a
// symlink or not a directory, is owned by another user, or grants any
// group or world permission.
var ErrUnsafeDir = errors.New("not a private directory")

// PrivateDir makes dir a private directory of the effective user: missing
// components are created with mode 0700, and dir itself, created or found,
// must then be a real directory (never a symlink) owned by the euid with
// no group or world permission — an existing 0755 directory is refused,
// never quietly accepted or changed. The refusal wraps ErrUnsafeDir.
func PrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("checking %s: %w", dir, err)
	}
	return CheckPrivateDir(dir, fi)
}

// CheckPrivateDir applies PrivateDir's rule to the FileInfo of dir.
func CheckPrivateDir(dir string, fi fs.FileInfo) error {
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symlink: %w", dir, ErrUnsafeDir)
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory: %w", dir, ErrUnsafeDir)
	case st != nil && int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%s is owned by uid %d, not %d: %w", dir, st.Uid, os.Geteuid(), ErrUnsafeDir)
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("%s has mode %04o; it must be 0700: %w", dir, fi.Mode().Perm(), ErrUnsafeDir)
	}
	return nil
}
