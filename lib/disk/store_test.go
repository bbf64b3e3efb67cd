package disk

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/fileid"
	"barn.dev/lib/safefile/safefiletest"
	"barn.dev/lib/wire/wiretest"
)

func storeFixture(t *testing.T) (root, nodeDir, src string) {
	t.Helper()
	home := t.TempDir()
	nodeDir = filepath.Join(home, "nodes", "pg-1")
	if err := os.MkdirAll(nodeDir, 0o700); err != nil {
		t.Fatal(err)
	}
	src = filepath.Join(nodeDir, "data.qcow2")
	if err := os.WriteFile(src, []byte("precious"), 0o640); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(home, "disks"), nodeDir, src
}

// own is a marker whose recorded identity names no file of the test.
func own() Ownership {
	return Ownership{Node: "pg-1", Name: "data", Serial: "abc", SizeBytes: 8, Mount: "/data", Filesystem: "xfs",
		Disk: &fileid.ID{Device: 1, Inode: 1}}
}

// ownOf is own() carrying the identity of the disk at src, as destroy
// passes the node state's record of the disk it created.
func ownOf(t *testing.T, src string) Ownership {
	t.Helper()
	id, err := fileid.Of(src)
	if err != nil {
		t.Fatal(err)
	}
	o := own()
	o.Disk = &id
	return o
}

func TestPreserveListReattach(t *testing.T) {
	root, _, src := storeFixture(t)
	dir := filepath.Join(root, "pg-1", "data")
	if err := os.MkdirAll(root, 0o700); err != nil {
		t.Fatal(err)
	}
	o := ownOf(t, src)
	if err := Preserve(src, dir, o); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(src); !os.IsNotExist(err) {
		t.Fatal("source still present after preserve")
	}
	fi, _ := os.Stat(filepath.Join(dir, RetainedDiskFile))
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("retained disk mode %v, want narrowed to 0600", fi.Mode())
	}
	all, err := List(root)
	if err != nil || len(all) != 1 || !all[0].Ownership.Matches("pg-1", "data", "abc", "/data", 8) {
		t.Fatalf("list = %+v, %v", all, err)
	}
	if all[0].Ownership.Matches("pg-1", "data", "abc", "/data", 9) {
		t.Fatal("a different size must not match")
	}
	// resumable: calling again after the move only rewrites the marker
	if err := Preserve(src, dir, o); err != nil {
		t.Fatalf("resumed preserve: %v", err)
	}
	if err := Reattach(dir, src); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(src); string(b) != "precious" {
		t.Fatal("reattached disk lost its bytes")
	}
	// lent: the marker stays until Release, so the disk is never unowned
	if lent, err := Lent(dir); err != nil || !lent {
		t.Fatalf("Lent after Reattach = %v, %v", lent, err)
	}
	if _, err := ReadRetained(dir); exitcode.As(err).Reason != "retained_disk_lent" {
		t.Fatalf("ReadRetained of a lent disk: %v", err)
	}
	if _, err := List(root); exitcode.As(err).Reason != "retained_disk_lent" {
		t.Fatalf("List with a lent disk: %v", err)
	}
	// a rolled-back create returns it beside its marker
	if err := Return(src, dir); err != nil {
		t.Fatal(err)
	}
	if all, err := List(root); err != nil || len(all) != 1 {
		t.Fatalf("after Return: %+v, %v", all, err)
	}
	if err := Release(dir); exitcode.ClassOf(err) != exitcode.Conflict {
		t.Fatalf("Release of a disk still in the store: %v", err)
	}
	// a committed create releases the marker
	if err := Reattach(dir, src); err != nil {
		t.Fatal(err)
	}
	if err := Release(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatal("store dir kept after release")
	}
	if err := Release(dir); err != nil {
		t.Fatalf("Release is idempotent: %v", err)
	}
	if b, _ := os.ReadFile(src); string(b) != "precious" {
		t.Fatal("released disk lost its bytes")
	}
}

// TestReturnNeverReplacesAStoredDisk: a disk back in the store is never
// overwritten by the node's copy, and a foreign marker-less dir is refused.
func TestReturnNeverReplacesAStoredDisk(t *testing.T) {
	root, _, src := storeFixture(t)
	dir := filepath.Join(root, "pg-1", "data")
	if err := Preserve(src, dir, ownOf(t, src)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, []byte("other"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Return(src, dir); exitcode.ClassOf(err) != exitcode.Conflict {
		t.Fatalf("Return over a stored disk: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, RetainedDiskFile)); string(b) != "precious" {
		t.Fatalf("stored disk replaced: %q", b)
	}
	if err := Return(src, filepath.Join(root, "pg-1", "nothing")); exitcode.ClassOf(err) != exitcode.Conflict {
		t.Fatalf("Return into a dir without a marker: %v", err)
	}
}

func TestStoreIsFailClosed(t *testing.T) {
	root, _, src := storeFixture(t)
	dir := filepath.Join(root, "pg-1", "data")
	if err := Preserve(src, dir, ownOf(t, src)); err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(stray, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := List(root); exitcode.ClassOf(err) != exitcode.Integrity {
		t.Fatalf("list with stray entry: %v", err)
	}
	if _, _, err := DeleteAll(root); exitcode.ClassOf(err) != exitcode.Integrity {
		t.Fatalf("delete-all with stray entry: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, RetainedDiskFile)); err != nil {
		t.Fatal("fail-closed delete removed the disk")
	}
	os.Remove(stray)
	// a marker naming another node is refused
	if err := os.Link(filepath.Join(dir, RetainedDiskFile), filepath.Join(dir, "..", "x")); err == nil {
		if _, err := ReadRetained(dir); exitcode.ClassOf(err) != exitcode.Integrity {
			t.Fatalf("hard-linked disk accepted: %v", err)
		}
		os.Remove(filepath.Join(dir, "..", "x"))
	}
	deleted, kept, err := DeleteAll(root)
	if err != nil || len(deleted) != 1 || len(kept) != 0 {
		t.Fatalf("delete-all: %v %v %v", deleted, kept, err)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Fatal("empty store root kept")
	}
}

func TestPreserveRefusesToReplaceRetained(t *testing.T) {
	root, nodeDir, src := storeFixture(t)
	dir := filepath.Join(root, "pg-1", "data")
	if err := Preserve(src, dir, ownOf(t, src)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := Preserve(src, dir, ownOf(t, src))
	if e := exitcode.As(err); e == nil || e.Reason != "retained_disk_exists" {
		t.Fatalf("err = %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, RetainedDiskFile)); string(b) != "precious" {
		t.Fatal("retained disk replaced")
	}
	_ = nodeDir
	// missing both → integrity
	os.Remove(src)
	if err := Preserve(filepath.Join(nodeDir, "gone.qcow2"), filepath.Join(root, "pg-1", "gone"), own()); exitcode.ClassOf(err) != exitcode.Integrity {
		t.Fatalf("missing disk: %v", err)
	}
}

// TestReadRetainedRefusesDuplicateAndCaseVariantNames: the ownership
// marker that authorises reattaching or deleting a retained disk is read
// strictly.
func TestReadRetainedRefusesDuplicateAndCaseVariantNames(t *testing.T) {
	dir, marker, good := retainedFixture(t)
	variants, err := wiretest.Variants(bytes.TrimSpace(good))
	if err != nil {
		t.Fatal(err)
	}
	for kind, bad := range variants {
		if err := os.WriteFile(marker, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadRetained(dir); exitcode.ClassOf(err) != exitcode.Integrity {
			t.Errorf("%s name: %v, want integrity", kind, err)
		}
	}
}

// TestReadRetainedNeverReadsThroughASwappedSymlink: the ownership marker
// that authorises reattaching or deleting a retained disk is checked on
// the descriptor it is read from, never through a symlink swapped in
// after the check.
func TestReadRetainedNeverReadsThroughASwappedSymlink(t *testing.T) {
	dir, marker, good := retainedFixture(t)
	forged := filepath.Join(t.TempDir(), "forged.json")
	if err := os.WriteFile(forged, bytes.Replace(good, []byte(`"serial":"`), []byte(`"serial":"FORGED`), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	safefiletest.SwapRace(t, marker, good, 0o600, forged, 3*time.Second,
		func() (string, error) {
			m, err := ReadRetained(dir)
			if err != nil || m == nil {
				return "", err
			}
			return m.Serial, nil
		},
		func(serial string) bool { return strings.HasPrefix(serial, "FORGED") })
}

// retainedFixture preserves one disk and returns its store directory, its
// ownership marker and the marker's bytes.
func retainedFixture(t *testing.T) (dir, marker string, good []byte) {
	t.Helper()
	root, _, src := storeFixture(t)
	dir = filepath.Join(root, "pg-1", "data")
	if err := Preserve(src, dir, ownOf(t, src)); err != nil {
		t.Fatal(err)
	}
	marker = filepath.Join(dir, OwnershipFile)
	good, err := os.ReadFile(marker)
	if err != nil {
		t.Fatal(err)
	}
	return dir, marker, good
}

// replaceDisk puts an operator's file at path: another inode, other bytes,
// the mode and single link the store's checks look at.
func replaceDisk(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("an operator's own disk"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestReplacedRetainedDiskIsKeptAndNamed is the attack of issue 13 finding
// 8 on the store: a disk.qcow2 replaced under a valid ownership marker was
// deleted by purge (the marker proved the directory, not the disk). Now
// the marker records the disk's identity: purge keeps another file and
// names it, Reattach refuses to hand it to a VM, and a marker written
// by an earlier development build (no identity) is refused: nothing in
// the store is deleted.
func TestReplacedRetainedDiskIsKeptAndNamed(t *testing.T) {
	root, _, src := storeFixture(t)
	dir := filepath.Join(root, "pg-1", "data")
	if err := Preserve(src, dir, ownOf(t, src)); err != nil {
		t.Fatal(err)
	}
	disk := filepath.Join(dir, RetainedDiskFile)
	replaceDisk(t, disk)
	if err := Reattach(dir, src); exitcode.As(err).Reason != "not_barns_disk" {
		t.Fatalf("Reattach of a replaced disk: %v, want not_barns_disk", err)
	}
	deleted, kept, err := DeleteAll(root)
	if err != nil || len(deleted) != 0 || len(kept) != 1 || !strings.Contains(kept[0], disk+": not the disk Barn preserved: another file") {
		t.Fatalf("DeleteAll = %v, %v, %v; want the replaced disk kept and named", deleted, kept, err)
	}
	if b, _ := os.ReadFile(disk); string(b) != "an operator's own disk" {
		t.Fatalf("the operator's disk is now %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, OwnershipFile)); err != nil {
		t.Fatalf("the marker of a kept disk was removed: %v", err)
	}

	// a marker of an earlier development build: refused, nothing deleted
	root2, _, src2 := storeFixture(t)
	dir2 := filepath.Join(root2, "pg-1", "data")
	if err := Preserve(src2, dir2, ownOf(t, src2)); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir2, OwnershipFile)
	b, err := os.ReadFile(marker)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "disk")
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(marker, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = DeleteRetained(dir2)
	if e := exitcode.As(err); e == nil || e.Class != exitcode.Integrity || e.Reason != "dev_build_format" || !strings.Contains(e.Message, marker) || e.Next == "" {
		t.Fatalf("DeleteRetained(marker without identity) = %v; want dev_build_format naming %s", err, marker)
	}
	if _, err := os.Stat(filepath.Join(dir2, RetainedDiskFile)); err != nil {
		t.Fatalf("disk under an old marker deleted: %v", err)
	}
}

// TestPreserveAndReturnMoveOnlyTheRecordedDisk: another file at the node's
// disk path is never moved into the store, neither by destroy (Preserve)
// nor by a rollback (Return).
func TestPreserveAndReturnMoveOnlyTheRecordedDisk(t *testing.T) {
	root, _, src := storeFixture(t)
	dir := filepath.Join(root, "pg-1", "data")
	o := ownOf(t, src)
	replaceDisk(t, src)
	if err := Preserve(src, dir, o); err == nil || exitcode.As(err).Reason != "not_barns_disk" {
		t.Fatalf("Preserve of a replaced disk: %v, want not_barns_disk", err)
	}
	if _, err := os.Stat(filepath.Join(dir, RetainedDiskFile)); !os.IsNotExist(err) {
		t.Fatalf("a replaced disk was moved into the store: %v", err)
	}

	root, _, src = storeFixture(t)
	dir = filepath.Join(root, "pg-1", "data")
	if err := Preserve(src, dir, ownOf(t, src)); err != nil {
		t.Fatal(err)
	}
	if err := Reattach(dir, src); err != nil {
		t.Fatal(err)
	}
	replaceDisk(t, src)
	if err := Return(src, dir); exitcode.As(err).Reason != "not_barns_disk" {
		t.Fatalf("Return of a replaced disk: %v, want not_barns_disk", err)
	}
	if b, _ := os.ReadFile(src); string(b) != "an operator's own disk" {
		t.Fatalf("the operator's disk was moved: %q", b)
	}
}

// TestStoreRefusesWritableNodeAndRootDirs: whoever can write disks/ or
// disks/<node> can rename a disk directory of their own making into place
// (disk and marker both), so the store is only trusted when every level is
// the user's own and 0700: List and DeleteAll refuse with integrity
// retained_store_mode naming the directory, and nothing is deleted.
func TestStoreRefusesWritableNodeAndRootDirs(t *testing.T) {
	root, _, src := storeFixture(t)
	dir := filepath.Join(root, "pg-1", "data")
	if err := Preserve(src, dir, ownOf(t, src)); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(root, "pg-1"), root} {
		for _, mode := range []os.FileMode{0o777, 0o755} {
			if err := os.Chmod(d, mode); err != nil {
				t.Fatal(err)
			}
			if _, err := List(root); exitcode.As(err) == nil || exitcode.As(err).Reason != "retained_store_mode" || !strings.Contains(err.Error(), d) {
				t.Errorf("list with %s at %04o: %v, want integrity retained_store_mode naming it", d, mode, err)
			}
			if deleted, _, err := DeleteAll(root); exitcode.ClassOf(err) != exitcode.Integrity || len(deleted) != 0 {
				t.Errorf("delete-all with %s at %04o: %v %v", d, mode, deleted, err)
			}
		}
		if err := os.Chmod(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, RetainedDiskFile)); err != nil {
		t.Fatal("the refused store lost its disk")
	}
	if all, err := List(root); err != nil || len(all) != 1 {
		t.Fatalf("restored modes: %v %v", all, err)
	}
}
