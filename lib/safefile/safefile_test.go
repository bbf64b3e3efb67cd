package safefile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestWriteReplacesAtomicallyWithExactMode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "doc.json")
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	for _, c := range []struct {
		data string
		mode os.FileMode
	}{{"one\n", 0o600}, {"two\n", 0o644}} {
		if err := Write(path, []byte(c.data), c.mode); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		fi, _ := os.Stat(path)
		if err != nil || string(got) != c.data || fi.Mode().Perm() != c.mode {
			t.Fatalf("after Write(%q, %v): %q, %v, mode %v", c.data, c.mode, got, err, fi.Mode())
		}
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("temporary files left behind: %v", ents)
	}
}

// TestWriteReplacesASymlinkNeverWritesThroughIt: a symlink planted at the
// target is replaced by the new file; what it pointed at is untouched.
func TestWriteReplacesASymlinkNeverWritesThroughIt(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "doc")
	if err := os.Symlink(victim, path); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Fatalf("wrote through the symlink: victim is %q", b)
	}
	if fi, _ := os.Lstat(path); !fi.Mode().IsRegular() {
		t.Fatalf("target is %v, want a regular file", fi.Mode())
	}
}

func TestPendingCleanupLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	p, err := Create(filepath.Join(dir, "seed.iso"), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write([]byte("partial")); err != nil {
		t.Fatal(err)
	}
	if err := p.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("left %v", ents)
	}
}

// TestOpenChecksWhatItOpened: symlinks, FIFOs (without blocking) and
// directories are refused; the FileInfo is the open descriptor's.
func TestOpenChecksWhatItOpened(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "reg")
	if err := os.WriteFile(reg, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(reg, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{link, fifo, dir} {
		done := make(chan error, 1)
		go func() { _, _, err := Open(p); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) {
				t.Errorf("Open(%s) = %v, want ErrNotRegular", filepath.Base(p), err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Open(%s) blocked", filepath.Base(p))
		}
	}
	if _, _, err := Open(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	data, fi, err := ReadFile(reg, 4, func(fi fs.FileInfo) error { return nil })
	if err != nil || string(data) != "data" || fi.Size() != 4 {
		t.Fatalf("ReadFile = %q, %v", data, err)
	}
	if _, _, err := ReadFile(reg, 3, nil); err == nil || !strings.Contains(err.Error(), "larger than 3 bytes") {
		t.Errorf("over the limit: %v", err)
	}
	refuse := errors.New("refused")
	if _, _, err := ReadFile(reg, 4, func(fs.FileInfo) error { return refuse }); !errors.Is(err, refuse) {
		t.Errorf("check not applied: %v", err)
	}
}

// TestPublishNewNeverReplaces: the staging file becomes dest with the
// exact mode; an existing dest is kept and the staging file stays.
func TestPublishNewNeverReplaces(t *testing.T) {
	dir := t.TempDir()
	staging, dest := filepath.Join(dir, ".d.tmp"), filepath.Join(dir, "d")
	if err := os.WriteFile(staging, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dest, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := PublishNew(staging, dest, 0o600); !errors.Is(err, ErrExists) {
		t.Fatalf("PublishNew over an existing file: %v", err)
	}
	if b, _ := os.ReadFile(dest); string(b) != "old" {
		t.Fatalf("dest replaced: %q", b)
	}
	os.Remove(dest)
	if err := PublishNew(staging, dest, 0o600); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(dest)
	if b, _ := os.ReadFile(dest); string(b) != "new" || fi.Mode().Perm() != 0o600 {
		t.Fatalf("dest = %q mode %v", b, fi.Mode())
	}
	if _, err := os.Lstat(staging); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("staging file kept after publish")
	}
}

// TestLinkNewKeepsTheProof: after LinkNew both names are one file; a
// foreign dest is never replaced.
func TestLinkNewKeepsTheProof(t *testing.T) {
	dir := t.TempDir()
	src, dest := filepath.Join(dir, ".x.barn-op"), filepath.Join(dir, "x")
	if err := os.WriteFile(src, []byte("ours"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := LinkNew(src, dest, 0o600); err != nil {
		t.Fatal(err)
	}
	if a, b := stat(t, src), stat(t, dest); !os.SameFile(a, b) {
		t.Fatal("LinkNew: names are not the same file")
	}
	if fi, _ := os.Stat(dest); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	other := filepath.Join(dir, "y")
	if err := os.WriteFile(other, []byte("operator's"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := LinkNew(src, other, 0o600); !errors.Is(err, ErrExists) {
		t.Fatalf("LinkNew over a foreign file: %v", err)
	}
	if b, _ := os.ReadFile(other); string(b) != "operator's" {
		t.Fatalf("foreign file replaced: %q", b)
	}
}

// TestPrivateDirRefusesWhatItDidNotMake: missing components are created
// 0700; an existing group- or world-readable directory, a symlink or a
// file are refused, never changed.
func TestPrivateDirRefusesWhatItDidNotMake(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	base := t.TempDir()
	dir := filepath.Join(base, "a", "b")
	if err := PrivateDir(dir); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(base, "a"), dir} {
		if fi, _ := os.Stat(d); fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s created %v", d, fi.Mode())
		}
	}
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := PrivateDir(open); !errors.Is(err, ErrUnsafeDir) || !strings.Contains(err.Error(), "0755") {
		t.Fatalf("0755 dir: %v", err)
	}
	if fi, _ := os.Stat(open); fi.Mode().Perm() != 0o755 {
		t.Fatal("PrivateDir changed an existing directory's mode")
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if err := PrivateDir(link); !errors.Is(err, ErrUnsafeDir) {
		t.Fatalf("symlink: %v", err)
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := PrivateDir(file); err == nil {
		t.Fatal("a file accepted as a directory")
	}
}

func stat(t *testing.T, p string) os.FileInfo {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}
