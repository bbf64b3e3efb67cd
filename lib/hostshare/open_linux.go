package hostshare

import (
	"errors"

	"golang.org/x/sys/unix"
)

// openNoSymlinks opens path as a directory with no symlink (nor magic
// link) followed anywhere in it: openat2 RESOLVE_NO_SYMLINKS, or the
// component walk on kernels without openat2 (before 5.6) or where a
// seccomp filter refuses it.
func openNoSymlinks(path string) (int, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		return openWalk(path)
	}
	return fd, err
}
