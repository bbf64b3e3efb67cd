//go:build unix

package hostshare

import (
	"strings"

	"golang.org/x/sys/unix"
)

// openWalk opens path one component at a time from "/", each with
// O_NOFOLLOW|O_DIRECTORY relative to its parent's descriptor, so a symlink
// anywhere fails with ELOOP (or ENOTDIR) instead of being followed.
func openWalk(path string) (int, error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	dir, err := unix.Open("/", flags, 0)
	if err != nil {
		return -1, err
	}
	for _, c := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		if c == "" {
			continue
		}
		next, err := unix.Openat(dir, c, flags, 0)
		unix.Close(dir)
		if err != nil {
			return -1, err
		}
		dir = next
	}
	return dir, nil
}
