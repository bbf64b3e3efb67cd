package disk

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/fileid"
	"barn.dev/lib/safefile"
	"barn.dev/lib/wire"
)

// OwnershipSchema is the schema of a retained disk's ownership.json.
const OwnershipSchema = "barn.disk.ownership/v1"

// maxMarkerBytes bounds the ownership marker a reader accepts (64 KiB).
const maxMarkerBytes = 64 << 10

// File names inside one retained-disk directory
// (<BARN_HOME>/disks/<node>/<disk>/).
const (
	RetainedDiskFile = "disk.qcow2"
	OwnershipFile    = "ownership.json"
	// DeletingFile is the marker's name once the deletion of its disk has
	// begun: DeleteRetained renames ownership.json to it first, so a crash
	// at any later step leaves a directory whose marker still proves the
	// disk and says the delete is to be finished (DeleteAll does), never a
	// disk without its marker nor a marker that looks lent.
	DeletingFile = "deleting.json"
)

// Ownership is the marker written beside a retained persistent disk. A
// retained disk is reattached only when node, name, serial, size and mount
// all equal the desired disk (exact identity: no resize, rename or
// conversion).
type Ownership struct {
	Schema      string    `json:"schema"`
	Node        string    `json:"node"`
	Name        string    `json:"name"`
	Path        string    `json:"path"` // absolute path of disk.qcow2 in the store
	Serial      string    `json:"serial"`
	SizeBytes   int64     `json:"size_bytes"`
	Mount       string    `json:"mount"`
	Filesystem  string    `json:"filesystem"` // as last reported, or requested
	OwnerUID    int       `json:"owner_uid"`
	PreservedAt time.Time `json:"preserved_at"`
	// Disk is the identity (lib/fileid) of the disk Barn created and moved
	// here, carried over from the node state: what DeleteRetained deletes
	// by, and what Reattach and Return check before moving the disk.
	// Required: a marker without one was written by an earlier
	// development build and is refused (integrity, dev_build_format).
	Disk *fileid.ID `json:"disk"`
}

// NotBarns is the reason a retained disk is not the one its marker
// records ("" when it is): disk.qcow2 is another file.
func (o Ownership) NotBarns(disk string) (string, error) {
	why, err := o.Disk.Differs(disk)
	if err != nil {
		return "", exitcode.Wrap(exitcode.Runtime, err, "checking %s", disk)
	}
	if why != "" {
		return "not the disk Barn preserved: " + why, nil
	}
	return "", nil
}

// Matches reports whether the retained disk is exactly the desired one.
func (o Ownership) Matches(node, name, serial, mount string, size int64) bool {
	return o.Node == node && o.Name == name && o.Serial == serial && o.Mount == mount && o.SizeBytes == size
}

// Preserve moves src (a node's persistent data disk) into dir (the retained
// disk directory, created 0700) as disk.qcow2 by atomic rename, then writes
// the ownership marker. It is idempotent for resumption: when src is gone
// and dir already holds disk.qcow2, only the marker is (re)written. It never
// overwrites a retained disk that is already there while src also exists
// (conflict, reason "retained_disk_exists"). m.Disk (the identity the
// node state records) is required: the disk moved — or found moved — must
// be that file: anything else is a conflict, reason "not_barns_disk", and
// nothing is moved or written.
func Preserve(src, dir string, m Ownership) error {
	if m.Disk == nil {
		return exitcode.New(exitcode.Runtime, "preserving %s: no identity recorded for it", src).WithReason("invalid_state_document")
	}
	dst := filepath.Join(dir, RetainedDiskFile)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "creating %s", dir)
	}
	if err := checkDir(dir); err != nil {
		return err
	}
	_, srcErr := os.Lstat(src)
	_, dstErr := os.Lstat(dst)
	switch {
	case srcErr == nil && dstErr == nil:
		return exitcode.New(exitcode.Conflict, "retained disk %s already exists; not replacing it with %s", dst, src).
			WithReason("retained_disk_exists")
	case srcErr == nil:
		if err := checkFile(src); err != nil {
			return err
		}
		if err := checkIdentity(m.Disk, src); err != nil {
			return err
		}
		if err := os.Chmod(src, 0o600); err != nil {
			return exitcode.Wrap(exitcode.Runtime, err, "chmod %s", src)
		}
		if err := safefile.Move(src, dst); err != nil {
			if errors.Is(err, safefile.ErrExists) {
				return exitcode.New(exitcode.Conflict, "retained disk %s already exists; not replacing it with %s", dst, src).
					WithReason("retained_disk_exists")
			}
			return exitcode.Wrap(exitcode.Runtime, err, "moving %s to %s", src, dst)
		}
	case dstErr == nil:
		// resumed: the move already happened
		if err := checkIdentity(m.Disk, dst); err != nil {
			return err
		}
	default:
		return exitcode.New(exitcode.Integrity, "persistent disk %s is missing and nothing is retained at %s", src, dst).
			WithReason("persistent_disk_missing")
	}
	m.Schema = OwnershipSchema
	m.Path = dst
	m.OwnerUID = os.Geteuid()
	if m.PreservedAt.IsZero() {
		m.PreservedAt = time.Now().UTC()
	}
	data, err := wire.Marshal(m)
	if err != nil {
		return err
	}
	if err := safefile.Write(filepath.Join(dir, OwnershipFile), append(data, '\n'), 0o600); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "writing %s", filepath.Join(dir, OwnershipFile))
	}
	return nil
}

// ReadRetained validates one retained-disk directory and returns its
// marker: (nil, nil) when dir does not exist. The directory must hold
// exactly disk.qcow2 and ownership.json, 0600 regular files with one link,
// owned by the euid, and the marker must name dir's disk. Anything else is
// an integrity error (7) naming the path: the store is then unusable and
// nothing in it is touched. A marker whose disk is lent to an unfinished
// create (Reattach, before Release or Return) is a conflict (4), reason
// "retained_disk_lent".
func ReadRetained(dir string) (*Ownership, error) {
	m, err := readMarker(dir)
	if err != nil || m == nil {
		return nil, err
	}
	if err := m.usable(); err != nil {
		return nil, err
	}
	return &m.Ownership, nil
}

// marker is a validated retained-disk directory.
type marker struct {
	Ownership
	file      string      // the marker: ownership.json, or deleting.json once a delete began
	hasDisk   bool        // disk.qcow2 is there (false: lent, or deleted)
	deleting  bool        // the marker is deleting.json
	id        fileid.ID   // the marker file's identity, read from the descriptor it was decoded from
	temps     []fileid.ID // marker temporaries an interrupted write left (by path in tempPaths)
	tempPaths []string
}

// usable is ReadRetained's refusal of a disk that is lent out or being
// deleted (nil when it is in the store).
func (m *marker) usable() error {
	switch {
	case m.deleting:
		return exitcode.New(exitcode.Conflict, "retained disk %s/%s is being deleted (%s: a delete of the retained disks was interrupted)", m.Node, m.Name, m.file).
			WithReason("retained_disk_deleting").WithNext("barn-node destroy --delete-persistent")
	case !m.hasDisk:
		return exitcode.New(exitcode.Conflict, "retained disk %s/%s is reattached by an unfinished create; its marker %s is kept until that node's state is committed", m.Node, m.Name, m.file).
			WithReason("retained_disk_lent").WithNext("barn-node status " + m.Node)
	}
	return nil
}

// readMarker validates dir like ReadRetained but also accepts a missing
// disk.qcow2 (the state between Reattach and Release, or a delete cut
// short), a marker renamed to deleting.json (with the disk under
// fileid.RemovingName while it is being removed), and temporary files of
// an interrupted marker write (".ownership.json<digits>") that decode as
// this directory's marker. Anything else is integrity, naming the entry.
func readMarker(dir string) (*marker, error) {
	if _, err := os.Lstat(dir); os.IsNotExist(err) {
		return nil, nil
	}
	if err := checkDir(dir); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "reading %s", dir)
	}
	m := &marker{}
	var markers, temps []string
	removing := false
	for _, e := range entries {
		switch name := e.Name(); {
		case name == RetainedDiskFile:
			m.hasDisk = true
		case name == OwnershipFile || name == DeletingFile:
			markers = append(markers, name)
		case name == filepath.Base(fileid.RemovingName(RetainedDiskFile)):
			removing = true
		case isMarkerTemp(name):
			temps = append(temps, filepath.Join(dir, name))
		default:
			return nil, unexpectedEntry(dir, name)
		}
	}
	if len(markers) != 1 {
		return nil, exitcode.New(exitcode.Integrity, "retained disk store %s holds %d markers (%v), expected one", dir, len(markers), markers).
			WithReason("retained_store_unexpected")
	}
	m.file, m.deleting = filepath.Join(dir, markers[0]), markers[0] == DeletingFile
	if removing && !m.deleting {
		return nil, unexpectedEntry(dir, filepath.Base(fileid.RemovingName(RetainedDiskFile)))
	}
	if m.hasDisk {
		if err := checkFile(filepath.Join(dir, RetainedDiskFile)); err != nil {
			return nil, err
		}
	}
	o, id, err := readOwnership(dir, m.file)
	if err != nil {
		return nil, err
	}
	m.Ownership, m.id = *o, id
	for _, t := range temps {
		_, id, err := readOwnership(dir, t)
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Integrity, err, "retained disk store %s holds %s, which is not a marker of this disk", dir, filepath.Base(t)).
				WithReason("retained_store_unexpected").WithNext("check " + t + " and move it out of " + dir)
		}
		m.temps, m.tempPaths = append(m.temps, id), append(m.tempPaths, t)
	}
	return m, nil
}

func unexpectedEntry(dir, name string) error {
	return exitcode.New(exitcode.Integrity, "retained disk store %s holds an unexpected entry %q", dir, name).
		WithReason("retained_store_unexpected")
}

// isMarkerTemp reports whether name is the temporary file of an atomic
// write of the marker (safefile: ".ownership.json<digits>").
func isMarkerTemp(name string) bool {
	rest, ok := strings.CutPrefix(name, "."+OwnershipFile)
	return ok && rest != "" && strings.Trim(rest, "0123456789") == ""
}

// readOwnership reads and validates the marker at path (in dir), checked
// on the descriptor it is read from — a marker swapped for a symlink or
// another file after a check is never trusted — and returns it with the
// identity of the file it was read from.
func readOwnership(dir, path string) (*Ownership, fileid.ID, error) {
	f, fi, err := safefile.Open(path)
	if err == nil {
		defer f.Close()
		err = checkFileInfo(path, fi)
	}
	var id fileid.ID
	if err == nil {
		id, err = fileid.OfFile(f)
	}
	var data []byte
	if err == nil {
		data, err = io.ReadAll(io.LimitReader(f, maxMarkerBytes+1))
	}
	if err == nil && len(data) > maxMarkerBytes {
		err = fmt.Errorf("%s: larger than %d bytes", path, maxMarkerBytes)
	}
	if err != nil {
		if exitcode.ClassOf(err) == exitcode.Integrity {
			return nil, id, err
		}
		return nil, id, exitcode.Wrap(exitcode.Integrity, err, "reading marker %s", path).WithReason("retained_store_unexpected")
	}
	o, err := decodeOwnership(dir, path, data)
	return o, id, err
}

func decodeOwnership(dir, marker string, data []byte) (*Ownership, error) {
	var o Ownership
	if err := wire.DecodeStrict(data, &o); err != nil {
		return nil, exitcode.Wrap(exitcode.Integrity, err, "%s", marker)
	}
	switch {
	case o.Schema != OwnershipSchema:
		return nil, exitcode.New(exitcode.Integrity, "%s: schema %q, expected %s", marker, o.Schema, OwnershipSchema)
	case o.Path != filepath.Join(dir, RetainedDiskFile) || o.Name != filepath.Base(dir) || o.Node != filepath.Base(filepath.Dir(dir)):
		return nil, exitcode.New(exitcode.Integrity, "%s names %s/%s at %s, not this directory", marker, o.Node, o.Name, o.Path)
	case o.OwnerUID != os.Geteuid():
		return nil, exitcode.New(exitcode.Integrity, "%s: owner uid %d is not ours (%d)", marker, o.OwnerUID, os.Geteuid())
	case o.Disk == nil:
		return nil, exitcode.New(exitcode.Integrity, "%s was written by an earlier development build of Barn (it records no identity of its disk); this Barn does not read it", marker).
			WithReason("dev_build_format").WithNext("move " + dir + " (your retained disk) out of " + filepath.Dir(filepath.Dir(dir)) + ", then plan and apply again")
	case o.Disk.Valid() != "":
		return nil, exitcode.New(exitcode.Integrity, "%s: disk identity: %s", marker, o.Disk.Valid()).WithReason("retained_store_unexpected")
	}
	return &o, nil
}

// removeTemps removes the marker temporaries readMarker proved, each by
// the identity it was read from.
func (m *marker) removeTemps() error {
	for i, t := range m.tempPaths {
		if err := removeByID(m.temps[i], t); err != nil {
			return err
		}
	}
	return nil
}

// removeByID removes path only while it is the file id records
// (fileid.Remove); another file there is integrity, and it stays.
func removeByID(id fileid.ID, path string) error {
	why, err := id.Remove(path)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "removing %s", path)
	}
	if why != "" {
		return exitcode.New(exitcode.Integrity, "%s is not the file Barn read there (%s); it was kept", path, why).
			WithReason("retained_store_unexpected").WithNext("check " + path + " and move it out of " + filepath.Dir(path))
	}
	return nil
}

// Reattach lends a validated retained disk from dir back to dst (a node's
// <disk>.qcow2) by an atomic rename that never replaces dst. The ownership
// marker stays in dir, so the disk always has an owner on record: Release
// removes it once the node's state is committed, Return moves the disk
// back when the create is rolled back. A disk.qcow2 that is not the file
// the marker's identity records is refused (conflict, "not_barns_disk").
func Reattach(dir, dst string) error {
	m, err := ReadRetained(dir)
	if err != nil {
		return err
	}
	if m == nil {
		return exitcode.New(exitcode.Conflict, "no retained disk in %s", dir).WithReason("persistent_disk_missing")
	}
	if err := checkIdentity(m.Disk, filepath.Join(dir, RetainedDiskFile)); err != nil {
		return err
	}
	// No check-then-rename: the move itself refuses an existing dst.
	if err := safefile.Move(filepath.Join(dir, RetainedDiskFile), dst); err != nil {
		if errors.Is(err, safefile.ErrExists) {
			return exitcode.New(exitcode.Conflict, "%s already exists; not replacing it with the retained disk", dst).WithReason("disk_exists")
		}
		return exitcode.Wrap(exitcode.Runtime, err, "reattaching %s", dir)
	}
	return nil
}

// Lent reports whether dir holds a valid marker whose disk is lent out
// (Reattach happened, neither Release nor Return yet).
func Lent(dir string) (bool, error) {
	m, err := readMarker(dir)
	return m != nil && !m.hasDisk && !m.deleting, err
}

// Return moves a lent disk at src back into dir, beside the marker that
// stayed there, never replacing a disk already in dir (conflict, reason
// "retained_disk_exists"). src must be a regular file with one link and,
// when the marker records the disk's identity, that very file (conflict,
// "not_barns_disk": another file is never moved into the store).
func Return(src, dir string) error {
	m, err := readMarker(dir)
	if err != nil {
		return err
	}
	if m == nil || m.hasDisk || m.deleting {
		return exitcode.New(exitcode.Conflict, "%s holds no marker of a lent disk; not moving %s there", dir, src).WithReason("retained_disk_exists")
	}
	if err := checkFile(src); err != nil {
		return err
	}
	if err := checkIdentity(m.Disk, src); err != nil {
		return err
	}
	if err := safefile.Move(src, filepath.Join(dir, RetainedDiskFile)); err != nil {
		if errors.Is(err, safefile.ErrExists) {
			return exitcode.New(exitcode.Conflict, "retained disk %s already exists; not replacing it with %s", filepath.Join(dir, RetainedDiskFile), src).
				WithReason("retained_disk_exists")
		}
		return exitcode.Wrap(exitcode.Runtime, err, "returning %s to %s", src, dir)
	}
	return nil
}

// Release removes the marker of a lent disk once the node that took it
// committed its state (the node state is then the disk's record), and the
// emptied store directories. It is idempotent: a dir already gone is not
// an error. A dir that still holds its disk is refused (conflict): that
// disk was never lent.
func Release(dir string) error {
	m, err := readMarker(dir)
	if err != nil || m == nil {
		return err
	}
	if m.hasDisk || m.deleting {
		return exitcode.New(exitcode.Conflict, "retained disk %s is still in the store; its marker is not released", filepath.Join(dir, RetainedDiskFile)).
			WithReason("retained_disk_exists")
	}
	if err := m.removeTemps(); err != nil {
		return err
	}
	if err := removeByID(m.id, m.file); err != nil {
		return err
	}
	if err := removeEmpty(dir); err != nil {
		return err
	}
	_ = syscall.Rmdir(filepath.Dir(dir)) // the node's store directory, when now empty
	return nil
}

// DeleteRetained deletes one validated retained disk directory, only when
// its disk.qcow2 is the file the marker's identity records; otherwise
// both files stay and kept says why. Its steps, each resumable: rename
// the marker to deleting.json (from then on the directory is a delete to
// finish, never a disk to reattach), remove the disk by its identity
// (fileid.Remove), remove the marker's temporaries an interrupted write
// left, the marker, and the emptied directory. A directory already
// renamed to deleting.json is finished the same way.
func DeleteRetained(dir string) (kept string, err error) {
	m, err := readMarker(dir)
	if err != nil || m == nil {
		return "", err
	}
	disk := filepath.Join(dir, RetainedDiskFile)
	if !m.deleting {
		if err := m.usable(); err != nil {
			return "", err
		}
		if why, err := m.NotBarns(disk); err != nil || why != "" {
			return why, err
		}
		deleting := filepath.Join(dir, DeletingFile)
		if err := safefile.Move(m.file, deleting); err != nil {
			return "", exitcode.Wrap(exitcode.Runtime, err, "marking %s for deletion", dir)
		}
		m.file = deleting
		deleteHook("marked")
	}
	why, err := m.Disk.Remove(disk)
	if err != nil {
		return "", exitcode.Wrap(exitcode.Runtime, err, "deleting %s", disk)
	}
	if why != "" {
		return "not the disk Barn preserved: " + why, nil
	}
	deleteHook("disk-removed")
	if err := m.removeTemps(); err != nil {
		return "", err
	}
	if err := removeByID(m.id, m.file); err != nil {
		return "", err
	}
	return "", removeEmpty(dir)
}

// deleteHook is called between DeleteRetained's steps; tests panic in it
// to crash there.
var deleteHook = func(step string) {}

// Retained is one entry of the store.
type Retained struct {
	Dir       string    `json:"dir"`
	Ownership Ownership `json:"ownership"`
	Deleting  bool      `json:"deleting,omitempty"` // a delete began (deleting.json); DeleteAll finishes it
}

// List walks the store root (<BARN_HOME>/disks) fail-closed: the root,
// every <node> directory (a real directory owned by the euid, mode 0700:
// anyone else who could write it could swap a disk or its marker in) and
// every <node>/<disk> directory must validate, or the walk fails naming
// the bad entry. A missing root is an empty store. A directory whose
// delete began (deleting.json) is listed with Deleting set; a lent disk
// fails the walk (conflict, retained_disk_lent). Sorted by node, then
// disk.
func List(root string) ([]Retained, error) {
	out := []Retained{}
	nodes, err := os.ReadDir(root)
	if os.IsNotExist(err) {
		return out, nil
	} else if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "reading %s", root)
	}
	if err := checkDir(root); err != nil {
		return nil, err
	}
	for _, n := range nodes {
		nd := filepath.Join(root, n.Name())
		if !n.IsDir() {
			return nil, exitcode.New(exitcode.Integrity, "retained disk store: unexpected entry %s", nd).WithReason("retained_store_unexpected")
		}
		if err := checkDir(nd); err != nil {
			return nil, err
		}
		disks, err := os.ReadDir(nd)
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Runtime, err, "reading %s", nd)
		}
		for _, d := range disks {
			m, err := readMarker(filepath.Join(nd, d.Name()))
			if err != nil {
				return nil, err
			}
			if m == nil {
				continue
			}
			if err := m.usable(); err != nil && !m.deleting {
				return nil, err
			}
			out = append(out, Retained{Dir: filepath.Join(nd, d.Name()), Ownership: m.Ownership, Deleting: m.deleting})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Dir < out[j].Dir })
	return out, nil
}

// DeleteAll deletes every retained disk whose marker proves it Barn's
// (DeleteRetained) after validating the whole store first (nothing is
// deleted when any entry fails to validate), then removes emptied node
// directories and the root itself when empty. Every disk it keeps is
// listed in kept as "<disk path>: <why>".
func DeleteAll(root string) (deleted, kept []string, err error) {
	all, err := List(root)
	if err != nil {
		return nil, nil, err
	}
	deleted = []string{}
	for _, r := range all {
		why, err := DeleteRetained(r.Dir)
		if err != nil {
			return deleted, kept, err
		}
		if why != "" {
			kept = append(kept, filepath.Join(r.Dir, RetainedDiskFile)+": "+why)
			continue
		}
		deleted = append(deleted, r.Dir)
		_ = removeEmpty(filepath.Dir(r.Dir))
	}
	_ = removeEmpty(root)
	return deleted, kept, nil
}

// checkIdentity refuses path when it is not the file id records.
func checkIdentity(id *fileid.ID, path string) error {
	why, err := id.Differs(path)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "checking %s", path)
	}
	if why != "" {
		return exitcode.New(exitcode.Conflict, "%s is not the disk Barn recorded: %s; not moving it", path, why).
			WithReason("not_barns_disk").WithNext("move " + path + " away after checking it, then retry")
	}
	return nil
}

func removeEmpty(dir string) error {
	if err := syscall.Rmdir(dir); err != nil && !os.IsNotExist(err) {
		return exitcode.Wrap(exitcode.Runtime, err, "removing %s", dir)
	}
	return nil
}

func checkDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "checking %s", dir)
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return exitcode.New(exitcode.Integrity, "%s is not a directory (mode %s)", dir, fi.Mode()).WithReason("retained_store_unexpected")
	case fi.Mode().Perm()&0o077 != 0:
		return exitcode.New(exitcode.Integrity, "%s has mode %04o, expected 0700", dir, fi.Mode().Perm()).WithReason("retained_store_mode").
			WithNext("chmod 0700 " + dir + "   # once you have checked nothing in it was changed")
	case st != nil && int(st.Uid) != os.Geteuid():
		return exitcode.New(exitcode.Integrity, "%s is owned by uid %d, not %d", dir, st.Uid, os.Geteuid()).WithReason("retained_store_owner")
	}
	return nil
}

func checkFile(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return exitcode.Wrap(exitcode.Integrity, err, "checking %s", path)
	}
	return checkFileInfo(path, fi)
}

func checkFileInfo(path string, fi os.FileInfo) error {
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular():
		return exitcode.New(exitcode.Integrity, "%s is not a regular file (mode %s)", path, fi.Mode()).WithReason("retained_store_unexpected")
	case st != nil && int(st.Uid) != os.Geteuid():
		return exitcode.New(exitcode.Integrity, "%s is owned by uid %d, not %d", path, st.Uid, os.Geteuid()).WithReason("retained_store_owner")
	case st != nil && st.Nlink != 1:
		return exitcode.New(exitcode.Integrity, "%s has %d links, expected 1", path, st.Nlink).WithReason("retained_store_links")
	case fi.Mode().Perm()&0o077 != 0 && filepath.Base(path) == OwnershipFile:
		return exitcode.New(exitcode.Integrity, "%s has mode %04o, expected 0600", path, fi.Mode().Perm()).WithReason("retained_store_mode")
	}
	return nil
}

// String names a retained disk for messages.
func (r Retained) String() string { return fmt.Sprintf("%s/%s", r.Ownership.Node, r.Ownership.Name) }
