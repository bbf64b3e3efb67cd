// Package fileid is how Barn tells the file it created at a path from any
// other file that later sits at the same path: the identity recorded when
// Barn creates a file is what it deletes (or moves) that file by, never
// the path alone.
//
// An identity is the file's device and inode, its birth time (statx
// STATX_BTIME) and its inode generation (FS_IOC_GETVERSION). All of them
// survive what happens to a file Barn hands to QEMU — writes, growth,
// chmod, a rename within the filesystem — so they fit overlays, data
// disks, UEFI vars and serial logs, whose bytes change. For a file whose
// bytes never change after Barn wrote them (a seed ISO, a key) the SHA-256
// of those bytes is recorded too.
//
// Device and inode alone do not identify a file: ext4 hands a freed inode
// number to the next file created in the directory at once. Birth time
// alone does not tell them apart either: ext4 takes it from a coarse clock,
// and of 1000 files deleted and immediately re-created on this project's
// ext4 test machine 990 got the same inode and the same birth time. The
// generation (ext4, XFS and btrfs set a new one for every inode they
// allocate) is what tells them apart; tmpfs has none but never reuses an
// inode number soon (a counter).
//
// Where the filesystem reports neither (ramfs, NFS, ext2/3 with 128-byte
// inodes), the identity is device and inode only and Weak reports true:
// such a record still refuses a file copied or restored over Barn's (a new
// inode), but cannot tell Barn's deleted file from a new one given the same
// inode number; callers say so when they delete by a weak identity.
package fileid

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"barn.dev/lib/safefile"
)

// ID identifies one file. Device is the st_dev encoding (makedev of the
// major and minor numbers), as syscall.Stat_t reports it.
type ID struct {
	Device     uint64     `json:"device"`
	Inode      uint64     `json:"inode"`
	Birth      *time.Time `json:"birth,omitempty"`            // statx btime, UTC; nil when the filesystem records none
	Generation *uint32    `json:"inode_generation,omitempty"` // FS_IOC_GETVERSION; nil when the filesystem keeps none
	SHA256     string     `json:"sha256,omitempty"`           // lower-case hex of the bytes, for files Barn never changes
}

// ErrNotRegular is returned (wrapped) for a path that is a symlink, a
// directory or any other non-regular file.
var ErrNotRegular = safefile.ErrNotRegular

// Of returns the identity of the regular file at path, looked at through
// one descriptor opened without following a symlink (a symlink, a
// directory or a FIFO is ErrNotRegular). A missing file wraps
// fs.ErrNotExist.
func Of(path string) (ID, error) { return of(path, false) }

// OfContent is Of plus the SHA-256 of the file's bytes, read from the same
// descriptor whose identity is returned.
func OfContent(path string) (ID, error) { return of(path, true) }

// OfFile is Of for a regular file already open as f (any access mode): the
// identity of what f refers to, whatever its name names now.
func OfFile(f *os.File) (ID, error) { return ofFile(f.Name(), f) }

func of(path string, digest bool) (ID, error) {
	f, _, err := safefile.Open(path)
	if err != nil {
		return ID{}, err
	}
	defer f.Close()
	id, err := ofFile(path, f)
	if err != nil || !digest {
		return id, err
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ID{}, fmt.Errorf("reading %s: %w", path, err)
	}
	id.SHA256 = hex.EncodeToString(h.Sum(nil))
	return id, nil
}

func ofFile(path string, f *os.File) (ID, error) {
	id, err := stat(path, f)
	if err != nil {
		return ID{}, err
	}
	if g, ok := generation(f); ok {
		id.Generation = &g
	}
	return id, nil
}

// Weak reports whether id is device and inode only (no birth time and no
// generation).
func (id ID) Weak() bool { return id.Birth == nil && id.Generation == nil }

// Valid reports what is wrong with a decoded identity ("" when nothing).
func (id ID) Valid() string {
	switch {
	case id.Inode == 0:
		return "inode is 0"
	case id.SHA256 != "" && !isHex64(id.SHA256):
		return fmt.Sprintf("sha256 %q is not 64 lower-case hex digits", id.SHA256)
	}
	return ""
}

// Differs returns "" when the file at path is the file id records, else
// why not, in words naming what differs ("another file (inode 12, not
// the recorded 34)", "created 2026-…, not when Barn created it (…)",
// "other bytes (SHA-256 …)", "a symlink or not a regular file"). A missing
// file is the error wrapping fs.ErrNotExist; other failures to look are
// errors too.
func (id ID) Differs(path string) (string, error) {
	var got ID
	var err error
	if id.SHA256 != "" {
		got, err = OfContent(path)
	} else {
		got, err = Of(path)
	}
	if errors.Is(err, ErrNotRegular) {
		return "a symlink or not a regular file", nil
	}
	if err != nil {
		return "", err
	}
	switch {
	case got.Device != id.Device || got.Inode != id.Inode:
		return fmt.Sprintf("another file (device %d inode %d, not the recorded device %d inode %d)", got.Device, got.Inode, id.Device, id.Inode), nil
	case id.Generation != nil && (got.Generation == nil || *got.Generation != *id.Generation):
		return fmt.Sprintf("another file with the same inode number (generation %s, not the recorded %d)", gen(got.Generation), *id.Generation), nil
	case id.Birth != nil && (got.Birth == nil || !got.Birth.Equal(*id.Birth)):
		return fmt.Sprintf("another file with the same inode number (created %s, not at the recorded %s)", birth(got.Birth), birth(id.Birth)), nil
	case id.SHA256 != "" && got.SHA256 != id.SHA256:
		return fmt.Sprintf("other bytes (SHA-256 %s, not the recorded %s)", got.SHA256, id.SHA256), nil
	}
	return "", nil
}

// Missing reports whether err (from Differs, Of or OfContent) says the
// file does not exist.
func Missing(err error) bool { return errors.Is(err, fs.ErrNotExist) }

func birth(t *time.Time) string {
	if t == nil {
		return "unknown"
	}
	return t.Format(time.RFC3339Nano)
}

func gen(g *uint32) string {
	if g == nil {
		return "unknown"
	}
	return fmt.Sprint(*g)
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Remove deletes path only when it is the file id records: "" and nil
// when it was removed (or was already gone), the reason it was kept when
// it is another file.
//
// A check followed by an unlink of the path would delete whatever was
// swapped in between. Remove instead moves the file it checked to
// RemovingName(path) (never replacing anything: renameat2
// RENAME_NOREPLACE), checks the identity of what it moved, and only then
// unlinks it; a file that turns out to be another one is moved back. A
// crash after the move leaves the file under RemovingName, where the next
// Remove with the same id finishes the delete; a file there that is not
// id's is never touched (its name is returned as kept).
func (id ID) Remove(path string) (kept string, err error) {
	moved := RemovingName(path)
	if why, err := id.finish(moved, path); err != nil || why != "" {
		return why, err
	}
	why, err := id.Differs(path)
	if Missing(err) {
		return "", nil
	}
	if err != nil || why != "" {
		return why, err
	}
	if afterCheck != nil {
		afterCheck(path)
	}
	if err := safefile.Move(path, moved); err != nil {
		if Missing(err) {
			return "", nil
		}
		return "", err
	}
	return id.finish(moved, path)
}

// afterCheck is a test hook run between Remove's first identity check and
// its move: a test swaps the file there.
var afterCheck func(path string)

// finish deletes moved when it is id's file, moves it back to path when it
// is another file (kept names why), and does nothing when it is absent.
func (id ID) finish(moved, path string) (kept string, err error) {
	why, err := id.Differs(moved)
	switch {
	case Missing(err):
		return "", nil
	case err != nil:
		return "", err
	case why == "":
		return "", safefile.Remove(moved)
	}
	if err := safefile.Move(moved, path); err != nil {
		return fmt.Sprintf("%s holds %s, which Barn did not create", moved, why), nil
	}
	return why, nil
}

// RemovingName is the name Remove moves path to before deleting it:
// ".<name>.barn-removing" in path's directory.
func RemovingName(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+RemovingSuffix)
}

// RemovingSuffix ends every RemovingName.
const RemovingSuffix = ".barn-removing"

// Same reports whether id and other identify the same file: the same
// device and inode, and the same generation and birth time where both
// record one (a missing one on either side is a mismatch when the other
// has it). SHA256 is not compared. A zero ID is the same as nothing.
func (id ID) Same(other ID) bool {
	if id.Inode == 0 || id.Device != other.Device || id.Inode != other.Inode {
		return false
	}
	if (id.Generation == nil) != (other.Generation == nil) || id.Generation != nil && *id.Generation != *other.Generation {
		return false
	}
	return (id.Birth == nil) == (other.Birth == nil) && (id.Birth == nil || id.Birth.Equal(*other.Birth))
}
