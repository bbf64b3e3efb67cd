package imagecache

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"barn.dev/lib/catalog"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/state"
)

// pulledCache is a state root whose cache holds what Barn writes: d12@1
// pulled from an accepted catalog, a trusted key, an imported image.
func pulledCache(t *testing.T) *state.Root {
	t.Helper()
	repo, c, data := oneImageRepository(t)
	id, err := c.Resolve("d12", "amd64")
	if err != nil {
		t.Fatal(err)
	}
	r := testRoot(t)
	st := &catalog.Store{Dir: r.ImagesDir()}
	src, _ := catalog.ParseSource(repo, true)
	if _, err := st.Activate(src, data, nil, catalog.ActivateOptions{ExactLocation: src.CatalogLocation()}); err != nil {
		t.Fatal(err)
	}
	_, public, _, err := catalog.GenerateKey("")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddTrust(public); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(context.Background(), r, id, nil); err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(t.TempDir(), "mine.qcow2")
	if err := os.WriteFile(mine, realQcow2(t, "32M", 5), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := MeasureFile(mine)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Import(context.Background(), r, mine, ImportOptions{SHA256: m.SHA256}); err != nil {
		t.Fatal(err)
	}
	return r
}

// tree lists every entry under dir with its bytes.
func tree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		b := []byte(fi.Mode().String())
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b = append(b, data...)
		}
		out[p] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPurgeDeletesOnlyWhatRecordsProve is the attack on purge by name
// pattern: files of an operator's with the names Barn uses — any *.qcow2
// in a family-shaped directory, a *.img under local/, a staging name, a
// key-shaped name under trust/, and a recorded image's name holding other
// bytes of the same size — were deleted with the cache. Now every one is
// named (Detail too) and nothing at all is removed; once they are moved
// away, purge removes what the records prove and the images directory.
func TestPurgeDeletesOnlyWhatRecordsProve(t *testing.T) {
	root := pulledCache(t)
	images := root.ImagesDir()
	pulled := filepath.Join(images, "d12", "d12-1-amd64.qcow2")
	size := func() int64 { fi, _ := os.Stat(pulled); return fi.Size() }()
	foreign := map[string][]byte{
		"d12/my-precious-vm.qcow2":                                   []byte("the user's own bytes"),
		"backups/my-vm-disk.qcow2":                                   []byte("the user's own bytes"),
		"local/my-notes.img":                                         []byte("the user's own bytes"),
		"d12/.staging-" + strings.Repeat("0", 64) + ".partial":       []byte("the user's own bytes"),
		"trust/0123456789ABCDEF.pub":                                 []byte("untrusted comment: not a key\n"),
		"manifests/versions/v9-" + strings.Repeat("0", 64) + ".json": []byte("{}"),
	}
	for rel, data := range foreign {
		p := filepath.Join(images, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// the pulled image's name, with other bytes of the same size, read-only
	if err := os.Chmod(pulled, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pulled, bytes.Repeat([]byte{'x'}, int(size)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(pulled, 0o444); err != nil {
		t.Fatal(err)
	}
	before := tree(t, images)
	for _, dry := range []bool{true, false} {
		_, err := Purge(context.Background(), root, dry)
		e := exitcode.As(err)
		if err == nil || e.Class != exitcode.Integrity || e.Reason != "unsafe_cache_entry" {
			t.Fatalf("Purge(dry=%v) = %v; want unsafe_cache_entry", dry, err)
		}
		var named []string
		for _, f := range e.Detail.([]ForeignEntry) {
			rel, _ := filepath.Rel(images, f.Path)
			named = append(named, rel)
		}
		sort.Strings(named)
		want := []string{"backups", "d12/.staging-" + strings.Repeat("0", 64) + ".partial", "d12/d12-1-amd64.qcow2", "d12/my-precious-vm.qcow2",
			"local/my-notes.img", "manifests/versions/v9-" + strings.Repeat("0", 64) + ".json", "trust/0123456789ABCDEF.pub"}
		if strings.Join(named, " ") != strings.Join(want, " ") {
			t.Fatalf("Purge(dry=%v) named %v, want %v", dry, named, want)
		}
		if !strings.Contains(e.Message, "its SHA-256") || e.Next == "" {
			t.Fatalf("Purge(dry=%v): %q, next %q", dry, e.Message, e.Next)
		}
		after := tree(t, images)
		if len(after) != len(before) {
			t.Fatalf("Purge(dry=%v) changed the cache: %d entries, then %d", dry, len(before), len(after))
		}
		for p, b := range before {
			if !bytes.Equal(after[p], b) {
				t.Fatalf("Purge(dry=%v) changed %s", dry, p)
			}
		}
	}
	for rel := range foreign {
		os.Remove(filepath.Join(images, rel))
	}
	os.Remove(filepath.Join(images, "backups"))
	os.Remove(pulled)
	res, err := Purge(context.Background(), root, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(images); !os.IsNotExist(err) {
		t.Fatalf("images directory left after purge: %v (removed %v)", err, res.Removed)
	}
	for _, want := range []string{"local/mine.qcow2", "local-images.json", "manifests/state.json", "trust/"} {
		found := false
		for _, r := range res.Removed {
			found = found || r == want
		}
		if !found {
			t.Errorf("purge did not remove %s (removed %v)", want, res.Removed)
		}
	}
}
