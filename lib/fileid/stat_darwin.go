package fileid

import (
	"fmt"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// stat returns the device, inode and birth time (st_birthtime) of the
// open file f (fstat on the descriptor; path names it in errors).
func stat(path string, f *os.File) (ID, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return ID{}, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return ID{}, fmt.Errorf("%s: %w", path, ErrNotRegular)
	}
	id := ID{Device: uint64(st.Dev), Inode: st.Ino}
	if b := st.Btim; b.Sec != 0 || b.Nsec != 0 {
		t := time.Unix(b.Sec, b.Nsec).UTC()
		id.Birth = &t
	}
	return id, nil
}

// generation is never read on macOS: st_gen is reported only to root, so
// APFS identities are device, inode and birth time.
func generation(*os.File) (uint32, bool) { return 0, false }
