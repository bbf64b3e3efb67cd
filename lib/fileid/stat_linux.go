package fileid

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const statxMask = unix.STATX_TYPE | unix.STATX_INO | unix.STATX_BTIME

// stat returns the device, inode and birth time of the open file f
// (statx on the descriptor; path names it in errors).
func stat(path string, f *os.File) (ID, error) {
	var st unix.Statx_t
	if err := unix.Statx(int(f.Fd()), "", unix.AT_EMPTY_PATH|unix.AT_STATX_SYNC_AS_STAT, statxMask, &st); err != nil {
		return ID{}, &fs.PathError{Op: "statx", Path: path, Err: err}
	}
	return fromStatx(path, &st)
}

// fsIocGetversion is FS_IOC_GETVERSION (_IOR('v', 1, long)); the
// filesystems that implement it write an int.
const fsIocGetversion = 0x80087601

// generation reads the inode generation of f; false when the filesystem
// does not keep one (ENOTTY, EOPNOTSUPP, …).
func generation(f *os.File) (uint32, bool) {
	var g uint64 // room for a long; the kernel writes the low 32 bits
	conn, err := f.SyscallConn()
	if err != nil {
		return 0, false
	}
	var errno syscall.Errno
	if err := conn.Control(func(fd uintptr) {
		_, _, errno = unix.Syscall(unix.SYS_IOCTL, fd, fsIocGetversion, uintptr(unsafe.Pointer(&g)))
	}); err != nil || errno != 0 {
		return 0, false
	}
	return uint32(g), true
}

func fromStatx(path string, st *unix.Statx_t) (ID, error) {
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return ID{}, fmt.Errorf("%s: %w", path, ErrNotRegular)
	}
	id := ID{Device: unix.Mkdev(st.Dev_major, st.Dev_minor), Inode: st.Ino}
	if st.Mask&unix.STATX_BTIME != 0 && (st.Btime.Sec != 0 || st.Btime.Nsec != 0) {
		b := time.Unix(st.Btime.Sec, int64(st.Btime.Nsec)).UTC()
		id.Birth = &b
	}
	return id, nil
}
