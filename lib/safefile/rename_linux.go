package safefile

import "golang.org/x/sys/unix"

// renameNoReplace renames src to dst, failing with EEXIST when dst
// exists, in one atomic step (renameat2 RENAME_NOREPLACE).
func renameNoReplace(src, dst string) error {
	return unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
}
