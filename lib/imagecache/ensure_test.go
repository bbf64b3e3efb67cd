package imagecache

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"barn.dev/lib/catalog"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/imageref"
	"barn.dev/lib/state"
)

// oneImageRepository is a repository directory holding d12@1 amd64 (a
// real 64 MiB qcow2) and the encoded catalog naming it, not yet signed.
func oneImageRepository(t *testing.T) (dir string, c *catalog.Catalog, data []byte) {
	t.Helper()
	img := realQcow2(t, "64M", 11)
	dir = t.TempDir()
	_ = os.MkdirAll(filepath.Join(dir, "images"), 0o755)
	file := "images/d12-1-amd64.qcow2"
	if err := os.WriteFile(filepath.Join(dir, file), img, 0o644); err != nil {
		t.Fatal(err)
	}
	id := identity(img, file)
	c = &catalog.Catalog{Schema: catalog.CatalogSchema, Revision: 1,
		Defaults: catalog.Defaults{Image: "d12", Channel: "stable", Arch: "native", Boot: "bios"},
		Images: map[string]catalog.Image{"d12": {Aliases: []string{}, Boot: "bios", Channels: map[string]string{"stable": "1"},
			Versions: map[string]catalog.Version{"1": {Status: "supported", Variants: map[string]catalog.Variant{"amd64": {
				File: file, SHA256: id.SHA256, Format: "qcow2", ArtifactSize: id.SizeBytes, VirtualSize: 64 << 20,
				SourceUser: "debian", Boot: "bios", Status: "supported"}}}}}}}
	data, err := catalog.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	return dir, c, data
}

// Ensure (the barn-node entry point) finds the repository whose active
// catalog names exactly the identity and pulls from it.
func TestEnsureFindsTheActiveRepository(t *testing.T) {
	dir, c, data := oneImageRepository(t)
	root := testRoot(t)
	src, _ := catalog.ParseSource(dir, true)
	st := &catalog.Store{Dir: root.ImagesDir()}
	if _, err := st.Activate(src, data, nil, catalog.ActivateOptions{ExactLocation: src.CatalogLocation()}); err != nil {
		t.Fatal(err)
	}
	resolved, err := c.Resolve("d12", "amd64")
	if err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	p, err := Ensure(context.Background(), root, resolved, &progress)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	if p != filepath.Join(root.ImagesDir(), "d12", "d12-1-amd64.qcow2") {
		t.Fatalf("path %s", p)
	}
	if !strings.Contains(progress.String(), "d12@1 amd64: 100%") {
		t.Fatalf("progress lines: %q", progress.String())
	}
	// An identity no active catalog names is refused, not guessed: the
	// cached file does not hold it (integrity, naming both digests), no
	// catalog can supply it (attached), and the cached file — a good copy
	// of what the catalog does name — is left in place.
	other := resolved
	other.SHA256 = strings.Repeat("1", 64)
	_, err = Ensure(context.Background(), root, other, nil)
	if e := exitcode.As(err); e.Reason != "image_mismatch" || !strings.Contains(e.Message, "no active catalog names") || e.Next != "barn-repo update" {
		t.Fatalf("unknown identity: %+v", e)
	}
	if again, err := Ensure(context.Background(), root, resolved, nil); err != nil || again != p {
		t.Fatalf("the good cached copy was disturbed: %v", err)
	}
	// Nothing cached and nothing names it: the lookup error itself.
	other.File = "images/d12-9-amd64.qcow2"
	if _, err := Ensure(context.Background(), root, other, nil); exitcode.As(err).Reason != "image_not_in_catalog" {
		t.Fatalf("unknown identity, nothing cached: %v", err)
	}
}

func TestProgressOutputs(t *testing.T) {
	now := time.Unix(0, 0)
	clock := func() time.Time { return now }
	var plain bytes.Buffer
	p := newProgress(&plain, "d12@1 amd64", 100<<20, 0, clock)
	p.Add(10 << 20) // within PlainInterval: no line yet
	now = now.Add(PlainInterval)
	p.Add(10 << 20)
	p.Done()
	lines := strings.Split(strings.TrimSpace(plain.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "d12@1 amd64: 20% 20.0/100.0 MiB at 10.0 MiB/s, ETA 8s") {
		t.Fatalf("plain progress: %q", plain.String())
	}
	var term bytes.Buffer
	b := newProgress(Terminal{&term}, "d12@1 amd64", 1<<20, 0, time.Now)
	b.Add(1 << 20)
	b.Done()
	if !strings.Contains(term.String(), "d12@1 amd64") || !strings.Contains(term.String(), "100%") {
		t.Fatalf("terminal progress bar: %q", term.String())
	}
}

// Concurrent Ensure calls for one image (parallel node preparation) pull it
// once and all succeed.
func TestConcurrentEnsurePullsOnce(t *testing.T) {
	id, repo, src, root := servedImage(t, 12)
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func() {
			_, err := newCache(root).Ensure(context.Background(), id, &src)
			errs <- err
		}()
	}
	for i := 0; i < 4; i++ {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent Ensure: %v", err)
		}
	}
	if ranges, _ := repo.stats(); len(ranges) != 1 {
		t.Fatalf("%d downloads, want 1", len(ranges))
	}
}

// TestEnsureNeverCachesIntoTheStore: an identity whose image is named like
// a catalog store directory (a catalog refuses such names; this one comes
// from elsewhere, e.g. hand-edited node state) is refused before anything
// is created, so nothing lands in <images>/trust or <images>/manifests.
func TestEnsureNeverCachesIntoTheStore(t *testing.T) {
	img := realQcow2(t, "64M", 11)
	for _, name := range catalog.StoreDirNames {
		root := testRoot(t)
		id := identity(img, "images/x-1-amd64.qcow2")
		id.Image = name
		_, err := Ensure(context.Background(), root, id, nil)
		if exitcode.ClassOf(err) != exitcode.Usage || exitcode.As(err).Reason != "invalid_image_name" {
			t.Fatalf("Ensure(image %s) = %v; want a usage refusal", name, err)
		}
		if _, err := os.Lstat(filepath.Join(root.ImagesDir(), name)); !os.IsNotExist(err) {
			t.Fatalf("%s was created: %v", filepath.Join(root.ImagesDir(), name), err)
		}
	}
}

// An unreadable publication record (here an earlier build's) refuses
// Ensure before it downloads: a pull whose record then refused would leave
// an image Barn never recorded as its own.
func TestEnsureReadsThePublicationRecordBeforePulling(t *testing.T) {
	id, repo, src, root := servedImage(t, 13)
	if err := os.MkdirAll(root.ImagesDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(root.ImagesDir(), "published.json")
	if err := os.WriteFile(rec, []byte(`{"schema":"barn.images.published/v0","files":{}}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := newCache(root).Ensure(context.Background(), id, &src)
	if e := exitcode.As(err); e == nil || e.Class.Code() != 7 || !strings.Contains(e.Message, rec) {
		t.Fatalf("Ensure with an earlier build's record: %v, want exit 7 naming %s", err, rec)
	}
	if ranges, _ := repo.stats(); len(ranges) != 0 {
		t.Fatalf("%d downloads before the refusal, want 0", len(ranges))
	}
}

// servedImage serves one real qcow2 image (seed picks its bytes) from a
// fake repository and gives a fresh state root to cache it in.
func servedImage(t *testing.T, seed byte) (imageref.Identity, *fakeRepo, catalog.Source, *state.Root) {
	img := realQcow2(t, "64M", seed)
	id := identity(img, "images/d12-1-amd64.qcow2")
	repo := &fakeRepo{files: map[string][]byte{id.File: img}}
	return id, repo, serve(t, repo), testRoot(t)
}
