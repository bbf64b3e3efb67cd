package safefile

import "golang.org/x/sys/unix"

// renameNoReplace renames src to dst, failing with EEXIST when dst
// exists, in one atomic step (renamex_np RENAME_EXCL, macOS 10.12+).
func renameNoReplace(src, dst string) error {
	return unix.RenamexNp(src, dst, unix.RENAME_EXCL)
}
