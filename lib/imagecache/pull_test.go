package imagecache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"barn.dev/lib/catalog"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/fileid"
	"barn.dev/lib/imageref"
	"barn.dev/lib/state"
)

// realQcow2 makes a small real qcow2 with qemu-img and some data written
// into it (so that it is a few hundred KiB), returning its bytes.
func realQcow2(t testing.TB, virtual string, fill byte) []byte {
	t.Helper()
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img is not installed: cannot create real qcow2 images")
	}
	dir := t.TempDir()
	raw := filepath.Join(dir, "raw")
	if err := os.WriteFile(raw, bytes.Repeat([]byte{fill, 1, 2, 3}, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "img.qcow2")
	if out, err := exec.Command("qemu-img", "convert", "-q", "-f", "raw", "-O", "qcow2", raw, p).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img convert: %v\n%s", err, out)
	}
	if out, err := exec.Command("qemu-img", "resize", "-q", "-f", "qcow2", p, virtual).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img resize: %v\n%s", err, out)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func identity(data []byte, file string) imageref.Identity {
	s := sha256.Sum256(data)
	return imageref.Identity{Image: "d12", Version: "1", Arch: "amd64", File: file, SizeBytes: int64(len(data)), SHA256: hex.EncodeToString(s[:]), Boot: "bios", SourceUser: "debian"}
}

// fakeRepo is an HTTP repository serving files from memory, able to drop
// the connection mid-file, ignore Range, or stall.
type fakeRepo struct {
	mu          sync.Mutex
	files       map[string][]byte
	dropAfter   int  // >0: the next full-body response is cut after this many bytes
	ignoreRange bool // answer 200 with the whole file even to a Range request
	stall       time.Duration
	ranges      []string // Range header of every request, "" when none
	served      int      // body bytes written
}

func (f *fakeRepo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	data, ok := f.files[strings.TrimPrefix(r.URL.Path, "/")]
	f.ranges = append(f.ranges, r.Header.Get("Range"))
	drop, ignore, stall := f.dropAfter, f.ignoreRange, f.stall
	f.dropAfter = 0
	f.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	if ignore {
		r.Header.Del("Range")
	}
	if drop > 0 || stall > 0 {
		n := drop
		if n == 0 {
			n = len(data) / 2
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(data[:n])
		f.count(n)
		w.(http.Flusher).Flush()
		if stall > 0 {
			time.Sleep(stall)
		}
		panic(http.ErrAbortHandler) // cut the connection mid-file
	}
	cw := &countingWriter{ResponseWriter: w, f: f}
	http.ServeContent(cw, r, "", time.Time{}, bytes.NewReader(data))
}

// stats returns a copy of the request log and the byte count.
func (f *fakeRepo) stats() ([]string, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string{}, f.ranges...), f.served
}

func (f *fakeRepo) count(n int) { f.mu.Lock(); f.served += n; f.mu.Unlock() }

type countingWriter struct {
	http.ResponseWriter
	f *fakeRepo
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	c.f.count(n)
	return n, err
}

func testRoot(t *testing.T) *state.Root {
	t.Helper()
	home := filepath.Join(t.TempDir(), "barn")
	root, err := state.Open(func(k string) string {
		switch k {
		case "BARN_HOME":
			return home
		case "HOME":
			return filepath.Dir(home)
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func serve(t *testing.T, repo *fakeRepo) catalog.Source {
	srv := httptest.NewServer(repo)
	t.Cleanup(srv.Close)
	src, err := catalog.ParseSource(srv.URL, true)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func ranges0(r *fakeRepo) func() []string { return func() []string { x, _ := r.stats(); return x } }
func served0(r *fakeRepo) func() int      { return func() int { _, n := r.stats(); return n } }

func newCache(root *state.Root) *Cache {
	return &Cache{Root: root, Puller: Puller{Backoff: time.Millisecond, Stall: 5 * time.Second}}
}

func classOf(err error) exitcode.Class { return exitcode.As(err).Class }

func TestPullResumesAfterDroppedConnection(t *testing.T) {
	img := realQcow2(t, "64M", 7)
	id := identity(img, "images/d12-1-amd64.qcow2")
	repo := &fakeRepo{files: map[string][]byte{id.File: img}, dropAfter: 100000}
	src := serve(t, repo)
	ranges, served := ranges0(repo), served0(repo)
	_, _ = ranges, served
	root := testRoot(t)
	c := newCache(root)
	var received []int64 // Received's counts: the staging file's bytes, resume included
	c.Puller.Received = func(n int64) { received = append(received, n) }
	p, err := c.Ensure(context.Background(), id, &src)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	got, _ := os.ReadFile(p)
	if !bytes.Equal(got, img) {
		t.Fatal("cached bytes differ from the artifact")
	}
	if len(received) < 3 || received[0] != 0 || !slices.IsSorted(received) || !slices.Contains(received, 100000) || received[len(received)-1] != int64(len(img)) {
		t.Fatalf("Received counts %v: want 0 up to %d, through 100000 (the resume counts on from the kept bytes)", received, len(img))
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o444 {
		t.Fatalf("cached mode %04o, want 0444", fi.Mode().Perm())
	}
	if len(ranges()) != 2 || ranges()[0] != "" || ranges()[1] != "bytes=100000-" {
		t.Fatalf("requests' Range headers = %q, want [\"\" \"bytes=100000-\"]", ranges())
	}
	if served() != len(img) {
		t.Fatalf("server sent %d bytes, want exactly %d (a resume re-sends nothing)", served(), len(img))
	}
	if _, err := os.Stat(StagingPath(p, id)); !os.IsNotExist(err) {
		t.Fatalf("staging file left behind: %v", err)
	}
}

func TestPullRestartsFromZeroWhenServerIgnoresRange(t *testing.T) {
	img := realQcow2(t, "64M", 8)
	id := identity(img, "images/d12-1-amd64.qcow2")
	repo := &fakeRepo{files: map[string][]byte{id.File: img}, dropAfter: 100000, ignoreRange: true}
	src := serve(t, repo)
	ranges, served := ranges0(repo), served0(repo)
	_, _ = ranges, served
	p, err := newCache(testRoot(t)).Ensure(context.Background(), id, &src)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	got, _ := os.ReadFile(p)
	if !bytes.Equal(got, img) {
		t.Fatal("cached bytes differ: a 200 answer to a Range request was spliced")
	}
	if len(ranges()) != 2 || ranges()[1] != "bytes=100000-" || served() != 100000+len(img) {
		t.Fatalf("ranges %q served %d; want a Range retry answered in full (%d bytes)", repo.ranges, served(), 100000+len(img))
	}
}

// Small input 2: a partial download, then the server serves a different
// file at the same URL: the staging file is discarded and only verified
// bytes ever reach the cache name.
func TestPullDiscardsStagingWhenServerChangesTheFile(t *testing.T) {
	a := realQcow2(t, "64M", 1)
	b := realQcow2(t, "64M", 2)
	if len(a) != len(b) || bytes.Equal(a, b) {
		t.Fatalf("want two different images of one size, got %d and %d bytes", len(a), len(b))
	}
	id := identity(a, "images/d12-1-amd64.qcow2")
	repo := &fakeRepo{files: map[string][]byte{id.File: a}, dropAfter: 100000}
	src := serve(t, repo)
	ranges, served := ranges0(repo), served0(repo)
	_, _ = ranges, served
	root := testRoot(t)
	c := newCache(root)
	c.Puller.Attempts = 1
	_, err := c.Ensure(context.Background(), id, &src)
	if err == nil || classOf(err) != exitcode.Runtime {
		t.Fatalf("interrupted pull: err %v, want a runtime error", err)
	}
	dest := CachePath(root.ImagesDir(), id)
	if fi, err := os.Stat(StagingPath(dest, id)); err != nil || fi.Size() != 100000 {
		t.Fatalf("want a 100000-byte staging file after the interruption: %v", err)
	}
	repo.mu.Lock()
	repo.files[id.File] = b
	repo.mu.Unlock()
	_, err = c.Ensure(context.Background(), id, &src)
	if classOf(err) != exitcode.Integrity || !strings.Contains(err.Error(), "sha256 mismatch") {
		t.Fatalf("resume against changed file: err %v, want integrity sha256 mismatch", err)
	}
	if _, err := os.Stat(dest); !os.IsNotExist(err) {
		t.Fatalf("unverified bytes reached the cache name: %v", err)
	}
	if _, err := os.Stat(StagingPath(dest, id)); !os.IsNotExist(err) {
		t.Fatalf("staging file with wrong bytes kept: %v", err)
	}
	// A fresh pull from zero still refuses the wrong file.
	if _, err := c.Ensure(context.Background(), id, &src); classOf(err) != exitcode.Integrity {
		t.Fatalf("fresh pull of the changed file: %v, want integrity", err)
	}
}

// Issue 20, case 6: bytes of a partial download damaged in the local
// cache (not the repository's fault) fail verification after the resume.
// The pull says the fault is local, discards them and downloads the
// artifact again from zero, in the same pull: no integrity error blames
// the repository and no hint sends the user to barn-repo update.
func TestPullDamagedPartialIsALocalFault(t *testing.T) {
	img := realQcow2(t, "64M", 9)
	id := identity(img, "images/d12-1-amd64.qcow2")
	repo := &fakeRepo{files: map[string][]byte{id.File: img}, dropAfter: 100000}
	src := serve(t, repo)
	root := testRoot(t)
	c := newCache(root)
	c.Puller.Attempts = 1
	if _, err := c.Ensure(context.Background(), id, &src); classOf(err) != exitcode.Runtime {
		t.Fatalf("interrupted pull: %v, want a runtime error", err)
	}
	dest := CachePath(root.ImagesDir(), id)
	staging := StagingPath(dest, id)
	part, err := os.ReadFile(staging)
	if err != nil || len(part) != 100000 {
		t.Fatalf("want a 100000-byte partial download: %v", err)
	}
	for i := 512; i < 1024; i++ {
		part[i] ^= 0xff // the local disk damaged it
	}
	if err := os.WriteFile(staging, part, 0o600); err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	c.Puller.Progress = &progress
	p, err := c.Ensure(context.Background(), id, &src)
	if err != nil {
		t.Fatalf("the pull after a damaged partial download: %v", err)
	}
	if got, _ := os.ReadFile(p); !bytes.Equal(got, img) {
		t.Fatal("cached bytes differ from the artifact")
	}
	if !strings.Contains(progress.String(), "a local fault, not the repository's; discarded, downloading it again from zero") {
		t.Fatalf("the fault was not reported as local:\n%s", progress.String())
	}
	if r := ranges0(repo)(); len(r) != 3 || r[1] != "bytes=100000-" || r[2] != "" {
		t.Fatalf("Range headers %q: want the resume, then one download from zero", r)
	}
}

// Small input 1: an entry with a wrong digest while a second valid image
// exists: pulling the first fails with integrity; nothing falls back.
func TestWrongDigestNeverFallsBack(t *testing.T) {
	good := realQcow2(t, "64M", 3)
	other := realQcow2(t, "32M", 4)
	bad := identity(good, "images/d12-1-amd64.qcow2")
	bad.SHA256 = strings.Repeat("0", 64)
	valid := identity(other, "images/d12-2-amd64.qcow2")
	valid.Version = "2"
	repo := &fakeRepo{files: map[string][]byte{bad.File: good, valid.File: other}}
	src := serve(t, repo)
	ranges, served := ranges0(repo), served0(repo)
	_, _ = ranges, served
	root := testRoot(t)
	_, err := newCache(root).Ensure(context.Background(), bad, &src)
	if classOf(err) != exitcode.Integrity || exitcode.ClassOf(err).Code() != 7 {
		t.Fatalf("err %v, want integrity (7)", err)
	}
	if d, ok := exitcode.As(err).Detail.(map[string]string); !ok || d["expected"] != bad.SHA256 || d["field"] != "sha256" {
		t.Fatalf("detail %#v does not name the expected digest", exitcode.As(err).Detail)
	}
	for _, p := range []string{CachePath(root.ImagesDir(), bad), CachePath(root.ImagesDir(), valid)} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s exists after a failed pull: no fallback may happen (%v)", p, err)
		}
	}
	if len(ranges()) != 1 {
		t.Fatalf("%d requests, want exactly the one for the requested artifact", len(ranges()))
	}
}

func TestTamperedCachedImageIsSetAsideAndReplaced(t *testing.T) {
	img := realQcow2(t, "64M", 5)
	id := identity(img, "images/d12-1-amd64.qcow2")
	repo := &fakeRepo{files: map[string][]byte{id.File: img}}
	src := serve(t, repo)
	ranges, served := ranges0(repo), served0(repo)
	_, _ = ranges, served
	root := testRoot(t)
	c := newCache(root)
	p, err := c.Ensure(context.Background(), id, &src)
	if err != nil {
		t.Fatal(err)
	}
	tamper := func() {
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
		f, _ := os.OpenFile(p, os.O_WRONLY, 0)
		_, _ = f.WriteAt([]byte{0xff}, int64(len(img)-1))
		f.Close()
		_ = os.Chmod(p, 0o444)
	}
	tamper()
	// In use by an applied node: integrity, the file stays where it is.
	c.InUse = func(string) ([]string, error) { return []string{"pg-meta-1"}, nil }
	_, err = c.Ensure(context.Background(), id, &src)
	if classOf(err) != exitcode.Integrity || !strings.Contains(exitcode.As(err).Next, "pg-meta-1") {
		t.Fatalf("in-use damaged base: err %v (next %q), want integrity naming the node", err, exitcode.As(err).Next)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("in-use base was moved: %v", err)
	}
	// Unreferenced: renamed .corrupt-<timestamp>, then pulled again.
	c.InUse = func(string) ([]string, error) { return nil, nil }
	before := len(ranges())
	p2, err := c.Ensure(context.Background(), id, &src)
	if err != nil || p2 != p {
		t.Fatalf("Ensure after tamper: %v", err)
	}
	got, _ := os.ReadFile(p)
	if !bytes.Equal(got, img) || len(ranges()) != before+1 {
		t.Fatal("the tampered image was not replaced by a fresh pull")
	}
	matches, _ := filepath.Glob(p + ".corrupt-*")
	if len(matches) != 1 {
		t.Fatalf("want one .corrupt-* file, got %v", matches)
	}
	// A verified cached file is reused without any request.
	if _, err := c.Ensure(context.Background(), id, &src); err != nil || len(ranges()) != before+1 {
		t.Fatalf("cached reuse: err %v, requests %d", err, len(ranges()))
	}
}

func TestStallWatchdogStopsASilentServer(t *testing.T) {
	img := realQcow2(t, "64M", 6)
	id := identity(img, "images/d12-1-amd64.qcow2")
	repo := &fakeRepo{files: map[string][]byte{id.File: img}, stall: 3 * time.Second}
	src := serve(t, repo)
	ranges, served := ranges0(repo), served0(repo)
	_, _ = ranges, served
	c := newCache(testRoot(t))
	c.Puller.Stall, c.Puller.Attempts = 200*time.Millisecond, 1
	start := time.Now()
	_, err := c.Ensure(context.Background(), id, &src)
	if err == nil || !strings.Contains(err.Error(), "stalled") {
		t.Fatalf("err %v, want a stall", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("stall detected after %s, want about 200ms", d)
	}
}

func TestPullFromLocalDirectoryAndBadHeader(t *testing.T) {
	img := realQcow2(t, "64M", 9)
	dir := t.TempDir()
	id := identity(img, "images/d12-1-amd64.qcow2")
	_ = os.MkdirAll(filepath.Join(dir, "images"), 0o755)
	if err := os.WriteFile(filepath.Join(dir, id.File), img, 0o644); err != nil {
		t.Fatal(err)
	}
	src, _ := catalog.ParseSource(dir, true)
	root := testRoot(t)
	p, err := newCache(root).Ensure(context.Background(), id, &src)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); !bytes.Equal(got, img) {
		t.Fatal("bytes differ")
	}
	// An artifact whose digest matches the catalog but whose header carries
	// a backing file is still refused.
	crafted := bytes.Clone(img)
	crafted[15] = 0x10 // backing_file_offset = 16
	cid := identity(crafted, "images/d12-2-amd64.qcow2")
	cid.Version = "2"
	_ = os.WriteFile(filepath.Join(dir, cid.File), crafted, 0o644)
	_, err = newCache(root).Ensure(context.Background(), cid, &src)
	if classOf(err) != exitcode.Integrity || !strings.Contains(err.Error(), "backing file") {
		t.Fatalf("err %v, want integrity: backing file", err)
	}
	if _, err := os.Stat(CachePath(root.ImagesDir(), cid)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("refused image reached the cache")
	}
}

// TestDiscardStagingSaysWhenItCannot: a rejected download or import whose
// staging file cannot be removed keeps the original error's class and
// says so (pull and import both discard through it), rather than silently
// leaving bytes a resume would start from.
func TestDiscardStagingSaysWhenItCannot(t *testing.T) {
	dir := t.TempDir()
	reject := exitcode.New(exitcode.Integrity, "sha256 mismatch").WithReason("image_mismatch")
	gone := filepath.Join(dir, ".staging-gone.partial")
	if err := discardStaging(gone, fileid.ID{}, reject); err != reject {
		t.Fatalf("missing staging: %v", err)
	}
	stuck := filepath.Join(dir, ".staging-stuck.partial")
	if err := os.MkdirAll(filepath.Join(stuck, "x"), 0o700); err != nil { // a non-empty directory: unremovable even as root
		t.Fatal(err)
	}
	err := discardStaging(stuck, fileid.ID{}, reject)
	e := exitcode.As(err)
	if e.Class != exitcode.Integrity || e.Reason != "image_mismatch" || !strings.Contains(e.Message, "could not be removed") || !strings.Contains(e.Message, stuck) {
		t.Fatalf("unremovable staging: %+v", e)
	}
}

// TestDiscardStagingRemovesOnlyTheRejectedFile: a rejected download is
// removed by the identity of the file that was measured, never by its
// name: another file at the staging name since (a new inode) is kept and
// the error says so; the measured one is removed.
func TestDiscardStagingRemovesOnlyTheRejectedFile(t *testing.T) {
	dir := t.TempDir()
	reject := exitcode.New(exitcode.Integrity, "sha256 mismatch").WithReason("image_mismatch")
	staging := filepath.Join(dir, ".staging-x.partial")
	if err := os.WriteFile(staging, []byte("REJECTED"), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := MeasureFile(staging)
	if m.ID.Inode == 0 {
		t.Fatalf("a failed measurement carries no identity: %v", err)
	}
	if err := os.Remove(staging); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(staging, []byte("SOMEONE ELSE'S"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := exitcode.As(discardStaging(staging, m.ID, reject))
	if e.Reason != "image_mismatch" || !strings.Contains(e.Message, "not the file Barn wrote") {
		t.Fatalf("discard of a swapped staging file: %+v", e)
	}
	if b, _ := os.ReadFile(staging); string(b) != "SOMEONE ELSE'S" {
		t.Fatal("a file Barn did not measure was removed")
	}
	m, _ = MeasureFile(staging)
	if err := discardStaging(staging, m.ID, reject); err != reject {
		t.Fatalf("discard of the measured file: %v", err)
	}
	if _, err := os.Lstat(staging); !os.IsNotExist(err) {
		t.Fatalf("the rejected download is still there: %v", err)
	}
}

// TestPullCreatesPrivateFamilyDirs: the cache directory of a family is
// created 0700, and an existing one open to others is refused (integrity)
// before anything is downloaded into it.
func TestPullCreatesPrivateFamilyDirs(t *testing.T) {
	home := t.TempDir()
	fam := filepath.Join(home, "images", "d12")
	if err := state.EnsurePrivateDir(filepath.Join(home, "images"), fam); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(fam); fi.Mode().Perm() != 0o700 {
		t.Fatalf("family dir %v", fi.Mode())
	}
	if err := os.Chmod(fam, 0o755); err != nil {
		t.Fatal(err)
	}
	p := &Puller{}
	err := p.Pull(context.Background(), catalog.Source{Kind: "dir", Root: t.TempDir()}, imageref.Identity{Image: "d12", File: "images/x.qcow2", SHA256: strings.Repeat("a", 64), SizeBytes: 1}, filepath.Join(fam, "x.qcow2"))
	if exitcode.ClassOf(err) != exitcode.Integrity || !strings.Contains(err.Error(), "0755") {
		t.Fatalf("pull into a 0755 family dir: %v", err)
	}
}

// TestDamagedCacheWithoutASourceIsIntegrity: a flipped byte in the cached
// base when no repository can deliver a fresh copy is the integrity error
// (7) naming the file, field, expected and actual digest — with the pull
// failure attached — never the pull's "not in catalog" (2) or "artifact
// unavailable" (1).
func TestDamagedCacheWithoutASourceIsIntegrity(t *testing.T) {
	img := realQcow2(t, "64M", 7)
	id := identity(img, "images/d12-1-amd64.qcow2")
	repoDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(repoDir, "images"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repoDir, id.File), img, 0o644); err != nil {
		t.Fatal(err)
	}
	src := catalog.Source{Kind: "dir", Root: repoDir}
	root := testRoot(t)
	c := newCache(root)
	c.InUse = func(string) ([]string, error) { return nil, nil }
	p, err := c.Ensure(context.Background(), id, &src)
	if err != nil {
		t.Fatal(err)
	}
	flip := func() {
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
		f, _ := os.OpenFile(p, os.O_WRONLY, 0)
		_, _ = f.WriteAt([]byte{0xee}, int64(len(img)-1))
		f.Close()
		_ = os.Chmod(p, 0o444)
	}
	check := func(err error, pullReason string) {
		t.Helper()
		e := exitcode.As(err)
		d, _ := e.Detail.(map[string]string)
		if e.Class != exitcode.Integrity || e.Reason != "image_mismatch" || d["field"] != "sha256" || d["expected"] != id.SHA256 || d["actual"] == "" || d["actual"] == id.SHA256 {
			t.Fatalf("err = %+v, want integrity image_mismatch naming the digests", e)
		}
		if !strings.Contains(e.Message, p) || !strings.Contains(e.Message, "no fresh copy") && !strings.Contains(e.Message, "could not be pulled") {
			t.Fatalf("message %q does not name the file and the pull failure", e.Message)
		}
		found := false
		if joined, ok := errors.Unwrap(err).(interface{ Unwrap() []error }); ok {
			for _, y := range joined.Unwrap() {
				found = found || exitcode.As(y).Reason == pullReason
			}
		}
		if !found {
			t.Fatalf("the pull failure (%s) is not attached: %v", pullReason, err)
		}
	}
	// the repository lost the file
	flip()
	if err := os.Remove(filepath.Join(repoDir, id.File)); err != nil {
		t.Fatal(err)
	}
	_, err = c.Ensure(context.Background(), id, &src)
	check(err, "artifact_unavailable")
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Fatal("the damaged file was not set aside")
	}
	// no active catalog names it at all: nothing could replace it, so the
	// damaged file stays where it is
	if err := os.WriteFile(p, img, 0o444); err != nil {
		t.Fatal(err)
	}
	flip()
	_, err = c.Ensure(context.Background(), id, nil)
	check(err, "image_not_in_catalog")
	if _, err := os.Lstat(p); err != nil {
		t.Fatal("a damaged file nothing can replace was moved")
	}
}

// TestPruneProvesAnImageByItsBytes: a file at a recorded cache path with
// the catalog's byte count but other bytes is not the artifact Barn
// pulled, so prune would not delete it; the artifact's own bytes are.
func TestPruneProvesAnImageByItsBytes(t *testing.T) {
	img := realQcow2(t, "16M", 3)
	id := identity(img, "images/d12-1-amd64.qcow2")
	dir := t.TempDir()
	p := CachePath(dir, id)
	r := &cacheRecord{artifacts: map[string]imageref.Identity{p: id}}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	other := append([]byte(nil), img...)
	other[len(other)-1] ^= 0xff
	if err := os.WriteFile(p, other, 0o444); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Lstat(p)
	if why := r.prove(p, fi); why != "" {
		t.Fatalf("name, size and mode match: %s", why)
	}
	if _, why := r.proveBytes(p); !strings.Contains(why, "is not the catalog's") {
		t.Fatalf("other bytes: %q", why)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, img, 0o444); err != nil {
		t.Fatal(err)
	}
	if _, why := r.proveBytes(p); why != "" {
		t.Fatalf("the artifact's bytes: %q", why)
	}
}

// TestPruneDeletesOnlyTheFileItProved: a cached image replaced after prune
// proved it (by its bytes) and before the delete — another file at the
// path, even with the same bytes — is kept (integrity, unsafe_cache_entry):
// the delete goes by the identity the proof read, never by the path.
func TestPruneDeletesOnlyTheFileItProved(t *testing.T) {
	img := realQcow2(t, "16M", 3)
	id := identity(img, "images/d12-1-amd64.qcow2")
	dir := t.TempDir()
	p := CachePath(dir, id)
	r := &cacheRecord{artifacts: map[string]imageref.Identity{p: id}}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, img, 0o444); err != nil {
		t.Fatal(err)
	}
	fid, why := r.proveBytes(p)
	if why != "" {
		t.Fatalf("the artifact's bytes: %q", why)
	}
	swapped := p + ".operator"
	if err := os.WriteFile(swapped, img, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(swapped, p); err != nil {
		t.Fatal(err)
	}
	if err := removeProven([]proven{{p, fid}}); exitcode.As(err).Reason != "unsafe_cache_entry" {
		t.Fatalf("removing a file replaced after the proof: %v, want unsafe_cache_entry", err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the replacing file was deleted: %v", err)
	}
	fid, _ = r.proveBytes(p)
	if err := removeProven([]proven{{p, fid}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("the proven file is still there: %v", err)
	}
}
