package fileid

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func write(t *testing.T, p, data string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// The identity survives what QEMU and the user do to a file Barn created
// (writes, growth, chmod, a rename within the directory) and matches the
// inode syscall.Stat reports.
func TestIdentitySurvivesWritesChmodAndRename(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "root.qcow2")
	write(t, p, "barn's overlay")
	id, err := Of(p)
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	if id.Device != uint64(st.Dev) || id.Inode != st.Ino {
		t.Fatalf("identity %+v, stat says device %d inode %d", id, st.Dev, st.Ino)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(strings.Repeat("guest writes ", 1000)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	moved := filepath.Join(dir, "moved.qcow2")
	if err := os.Rename(p, moved); err != nil {
		t.Fatal(err)
	}
	if why, err := id.Differs(moved); err != nil || why != "" {
		t.Fatalf("Differs after writes, chmod and rename = %q, %v; want the same file", why, err)
	}
}

// Another file at the recorded path is told apart: a copy (new inode), a
// file that reuses the very inode number of the deleted one (same device
// and inode, another birth time), other bytes for a digest, a symlink to
// the original.
func TestIdentityRefusesEveryOtherFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "seed.iso")
	write(t, p, "barn's seed")
	id, err := OfContent(p)
	if err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(dir, "keep")
	if err := os.Link(p, keep); err != nil {
		t.Fatal(err)
	}

	// a symlink to Barn's own file is not Barn's file
	os.Remove(p)
	if err := os.Symlink(keep, p); err != nil {
		t.Fatal(err)
	}
	if why, err := id.Differs(p); err != nil || !strings.Contains(why, "symlink") {
		t.Errorf("symlink: Differs = %q, %v", why, err)
	}
	os.Remove(p)

	// a copy with the same bytes is another file
	data, _ := os.ReadFile(keep)
	write(t, p, string(data))
	if why, err := id.Differs(p); err != nil || !strings.Contains(why, "another file") {
		t.Errorf("copy: Differs = %q, %v", why, err)
	}
	os.Remove(p)

	// same inode, other bytes (written in place)
	os.Remove(p)
	if err := os.Link(keep, p); err != nil {
		t.Fatal(err)
	}
	write(t, p, "rewritten")
	if why, err := id.Differs(p); err != nil || !strings.Contains(why, "other bytes") {
		t.Errorf("rewritten: Differs = %q, %v", why, err)
	}

	// a missing file is an error that says so
	os.Remove(p)
	if _, err := id.Differs(p); !Missing(err) {
		t.Errorf("missing: Differs err = %v, want fs.ErrNotExist", err)
	}
}

// The inode-reuse attack: delete Barn's file and create another at once,
// until the filesystem hands out the same inode number again. Device and
// inode then match, and on ext4 the birth time mostly does too (a coarse
// clock); the generation tells them apart.
func TestIdentityRefusesAReusedInode(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "nvram.fd")
	write(t, p, "barn's")
	id, err := Of(p)
	if err != nil {
		t.Fatal(err)
	}
	if id.Weak() {
		t.Skipf("%s records no birth times: the reuse is undetectable there (documented)", dir)
	}
	reused := false
	for i := 0; i < 200 && !reused; i++ {
		os.Remove(p)
		write(t, p, "an operator's")
		got, err := Of(p)
		if err != nil {
			t.Fatal(err)
		}
		reused = got.Inode == id.Inode && got.Device == id.Device
		if !reused {
			id = got // try again against this one
		}
	}
	if !reused {
		t.Skip("the filesystem did not reuse the inode within 200 creations; nothing to prove here")
	}
	if why, err := id.Differs(p); err != nil || !strings.Contains(why, "same inode number") {
		t.Fatalf("reused inode: Differs = %q, %v; want the birth time to tell them apart", why, err)
	}
	if kept, err := id.Remove(p); err != nil || kept == "" {
		t.Fatalf("Remove of a file with a reused inode = %q, %v; want it kept", kept, err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the other file was deleted: %v", err)
	}
}

func TestRemoveDeletesOnlyTheRecordedFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "data.qcow2")
	write(t, p, "barn's")
	id, err := Of(p)
	if err != nil {
		t.Fatal(err)
	}
	if kept, err := id.Remove(p); err != nil || kept != "" {
		t.Fatalf("Remove(own) = %q, %v", kept, err)
	}
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Fatalf("own file still there: %v", err)
	}
	if kept, err := id.Remove(p); err != nil || kept != "" {
		t.Fatalf("Remove(gone) = %q, %v; want nothing to do", kept, err)
	}
	write(t, p, "an operator's")
	if kept, err := id.Remove(p); err != nil || kept == "" {
		t.Fatalf("Remove(other) = %q, %v; want it kept with a reason", kept, err)
	}
	if data, _ := os.ReadFile(p); string(data) != "an operator's" {
		t.Fatalf("other file now %q", data)
	}
}

func TestValid(t *testing.T) {
	if (ID{Device: 1, Inode: 2}).Valid() != "" {
		t.Error("a weak identity is valid")
	}
	for _, bad := range []ID{{Device: 1}, {Device: 1, Inode: 2, SHA256: "ABC"}} {
		if bad.Valid() == "" {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// The file Remove checked is swapped for another between the check and
// the delete: the other file survives, at its name, and is reported.
func TestRemoveKeepsAFileSwappedInAfterTheCheck(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "root.qcow2")
	write(t, p, "barn's")
	id, err := Of(p)
	if err != nil {
		t.Fatal(err)
	}
	afterCheck = func(path string) {
		if err := os.Rename(path, filepath.Join(dir, "aside")); err != nil {
			t.Fatal(err)
		}
		write(t, path, "an operator's")
	}
	defer func() { afterCheck = nil }()
	kept, err := id.Remove(p)
	if err != nil || kept == "" {
		t.Fatalf("Remove with a swap after the check = %q, %v; want it kept with a reason", kept, err)
	}
	if data, err := os.ReadFile(p); err != nil || string(data) != "an operator's" {
		t.Fatalf("swapped-in file now %q, %v; want it back at its name, unchanged", data, err)
	}
	if _, err := os.Lstat(RemovingName(p)); !os.IsNotExist(err) {
		t.Fatalf("%s left behind: %v", RemovingName(p), err)
	}
}

// A crash between Remove's move and its unlink leaves the file under
// RemovingName: the next Remove deletes it there. Another file there is
// never deleted.
func TestRemoveFinishesAnInterruptedRemove(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "seed.iso")
	write(t, p, "barn's")
	id, err := OfContent(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p, RemovingName(p)); err != nil {
		t.Fatal(err)
	}
	if kept, err := id.Remove(p); err != nil || kept != "" {
		t.Fatalf("Remove after a crash = %q, %v", kept, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("left %v", entries)
	}
	write(t, RemovingName(p), "an operator's")
	write(t, p, "barn's too?")
	if kept, err := id.Remove(p); err != nil || kept == "" {
		t.Fatalf("Remove with a foreign %s = %q, %v; want it kept", RemovingName(p), kept, err)
	}
	for f, want := range map[string]string{p: "barn's too?", RemovingName(p): "an operator's"} {
		if data, _ := os.ReadFile(f); string(data) != want {
			t.Errorf("%s now %q, want %q", f, data, want)
		}
	}
}
