package disk

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/fileid"
)

type crashed struct{ step string }

// deleteAllCrashingAt runs DeleteAll with DeleteRetained crashing at step
// ("" never); true when it crashed.
func deleteAllCrashingAt(t *testing.T, root, step string) (hit bool) {
	t.Helper()
	deleteHook = func(s string) {
		if s == step {
			panic(crashed{s})
		}
	}
	defer func() {
		deleteHook = func(string) {}
		if r := recover(); r != nil {
			if _, ok := r.(crashed); !ok {
				panic(r)
			}
			hit = true
		}
	}()
	if _, kept, err := DeleteAll(root); err != nil || len(kept) != 0 {
		t.Fatalf("DeleteAll = kept %v, %v", kept, err)
	}
	return false
}

// TestDeleteAllResumesAfterACrashAtEveryStep: a delete of the retained
// disks killed after the marker is renamed, after the disk is removed, or
// inside fileid.Remove (the disk moved aside) is finished by the next
// DeleteAll — the directory was never a disk without its marker nor a
// marker that reads as lent — and meanwhile the disk cannot be
// reattached (conflict, retained_disk_deleting).
func TestDeleteAllResumesAfterACrashAtEveryStep(t *testing.T) {
	for _, step := range []string{"marked", "disk-removed", "disk-moved-aside"} {
		t.Run(step, func(t *testing.T) {
			root, _, src := storeFixture(t)
			dir := filepath.Join(root, "pg-1", "data")
			if err := Preserve(src, dir, ownOf(t, src)); err != nil {
				t.Fatal(err)
			}
			disk := filepath.Join(dir, RetainedDiskFile)
			if step == "disk-moved-aside" {
				deleteAllCrashingAt(t, root, "marked")
				if err := os.Rename(disk, fileid.RemovingName(disk)); err != nil {
					t.Fatal(err)
				}
			} else if !deleteAllCrashingAt(t, root, step) {
				t.Fatalf("did not crash at %s", step)
			}
			if _, err := ReadRetained(dir); exitcode.As(err).Reason != "retained_disk_deleting" {
				t.Fatalf("ReadRetained of a half-deleted disk: %v, want retained_disk_deleting", err)
			}
			if err := Reattach(dir, src); exitcode.As(err).Reason != "retained_disk_deleting" {
				t.Fatalf("Reattach of a half-deleted disk: %v", err)
			}
			deleteAllCrashingAt(t, root, "")
			if _, err := os.Stat(root); !os.IsNotExist(err) {
				t.Fatalf("store left after the resumed delete: %v", err)
			}
		})
	}
}

// TestMarkerTemporariesAreProvenThenRemoved: a marker write cut short
// leaves ".ownership.json<digits>" beside the marker. One that decodes as
// this directory's marker is Barn's: the store stays usable and the
// delete removes it. An empty or foreign one proves nothing: the store is
// refused (integrity) and it is kept.
func TestMarkerTemporariesAreProvenThenRemoved(t *testing.T) {
	for _, c := range []struct {
		name  string
		bytes func(marker []byte) []byte
		ok    bool
	}{
		{"this directory's marker", func(b []byte) []byte { return b }, true},
		{"empty", func([]byte) []byte { return nil }, false},
		{"another disk's marker", func(b []byte) []byte { return []byte(strings.Replace(string(b), `"name":"data"`, `"name":"logs"`, 1)) }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			root, _, src := storeFixture(t)
			dir := filepath.Join(root, "pg-1", "data")
			if err := Preserve(src, dir, ownOf(t, src)); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(dir, OwnershipFile))
			if err != nil {
				t.Fatal(err)
			}
			temp := filepath.Join(dir, "."+OwnershipFile+"1234567")
			if err := os.WriteFile(temp, c.bytes(b), 0o600); err != nil {
				t.Fatal(err)
			}
			_, kept, err := DeleteAll(root)
			_, lerr := os.Lstat(temp)
			switch {
			case c.ok && (err != nil || len(kept) != 0):
				t.Fatalf("proven temporary: DeleteAll kept %v, %v", kept, err)
			case c.ok:
				if _, err := os.Stat(root); !os.IsNotExist(err) {
					t.Fatalf("store left: %v", err)
				}
			case exitcode.As(err).Reason != "retained_store_unexpected" || lerr != nil:
				t.Fatalf("unproven temporary: DeleteAll %v, temp stat %v", err, lerr)
			}
		})
	}
}
