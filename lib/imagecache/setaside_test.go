package imagecache

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/fileid"
	"barn.dev/lib/imageref"
	"barn.dev/lib/safefile"
	"barn.dev/lib/state"
)

// damagedCache is pulledCache whose d12 base the user replaced with a file
// of their own (0600, other bytes); it returns the cache path and identity.
func damagedCache(t *testing.T) (*state.Root, string, imageref.Identity) {
	t.Helper()
	root := pulledCache(t)
	_, c, _ := oneImageRepository(t)
	id, err := c.Resolve("d12", "amd64")
	if err != nil {
		t.Fatal(err)
	}
	p := CachePath(root.ImagesDir(), id)
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("THE USER'S OWN FILE"), 0o600); err != nil {
		t.Fatal(err)
	}
	return root, p, id
}

// tamperedCache is pulledCache whose d12 base, the very file Barn
// published, had bytes changed in place (same inode: damage, not a
// replacement); it returns the cache path and identity.
func tamperedCache(t *testing.T) (*state.Root, string, imageref.Identity) {
	t.Helper()
	root := pulledCache(t)
	_, c, _ := oneImageRepository(t)
	id, err := c.Resolve("d12", "amd64")
	if err != nil {
		t.Fatal(err)
	}
	p := CachePath(root.ImagesDir(), id)
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("BIT ROT"), 4096); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return root, p, id
}

var asideClock = time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC)

func fixedCache(root *state.Root, progress *bytes.Buffer) *Cache {
	c := &Cache{Root: root, Puller: Puller{Backoff: time.Millisecond, Stall: 5 * time.Second, Now: func() time.Time { return asideClock }}}
	if progress != nil {
		c.Puller.Progress = progress
	}
	return c
}

// Ensure moves a damaged file aside without replacing anything, records
// the identity its verification read, returns it and says so on progress.
func TestSetAsideIsRecordedReturnedAndTold(t *testing.T) {
	root, p, id := damagedCache(t)
	before, err := fileid.Of(p)
	if err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	e, err := fixedCache(root, &progress).Fetch(context.Background(), id, nil)
	if err != nil {
		t.Fatal(err)
	}
	aside := p + ".corrupt-20261202T150000Z"
	if e.SetAside == nil || filepath.Join(root.ImagesDir(), e.SetAside.Path) != aside {
		t.Fatalf("Fetch returned set-aside %+v, want %s", e.SetAside, aside)
	}
	if why, err := e.SetAside.ID.Differs(aside); err != nil || why != "" {
		t.Fatalf("recorded identity is not the set-aside file: %q %v", why, err)
	}
	if e.SetAside.ID.Inode != before.Inode {
		t.Fatal("recorded identity is not the damaged file's")
	}
	rec, err := readSetAside(root.ImagesDir())
	if err != nil || len(rec) != 1 || rec[0].ID.Inode != before.Inode {
		t.Fatalf("record %+v, %v", rec, err)
	}
	// The CLI's path: Ensure tells progress.
	root2, p2, _ := damagedCache(t)
	if _, err := fixedCache(root2, &progress).Ensure(context.Background(), id, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(progress.String(), "set aside "+p2) {
		t.Fatalf("progress %q does not tell the set-aside", progress.String())
	}
}

// A file already at the set-aside name is never replaced: Ensure fails and
// both files stay.
func TestSetAsideNeverReplaces(t *testing.T) {
	root, p, id := damagedCache(t)
	aside := p + ".corrupt-20261202T150000Z"
	if err := os.WriteFile(aside, []byte("ALSO THE USER'S"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := fixedCache(root, nil).Fetch(context.Background(), id, nil)
	if err == nil || !errors.Is(err, safefile.ErrExists) {
		t.Fatalf("err %v, want a refusal to replace %s", err, aside)
	}
	if b, _ := os.ReadFile(aside); string(b) != "ALSO THE USER'S" {
		t.Fatalf("%s was replaced", aside)
	}
	if b, _ := os.ReadFile(p); string(b) != "THE USER'S OWN FILE" {
		t.Fatalf("%s was changed", p)
	}
}

// Prune and Purge delete a .corrupt-* file only by the recorded identity:
// one no record names, or another file put at a recorded name, is kept.
func TestCorruptFilesAreDeletedOnlyByRecordedIdentity(t *testing.T) {
	for _, purge := range []bool{false, true} {
		root, p, id := tamperedCache(t)
		dir := root.ImagesDir()
		e, err := fixedCache(root, nil).Fetch(context.Background(), id, nil)
		if err != nil {
			t.Fatal(err)
		}
		recorded := filepath.Join(dir, e.SetAside.Path)
		// A user's file with a set-aside name Barn never gave it.
		unrecorded := p + ".corrupt-20260101T000000Z"
		if err := os.WriteFile(unrecorded, []byte("MINE"), 0o600); err != nil {
			t.Fatal(err)
		}
		if purge {
			_, err := Purge(context.Background(), root, false)
			if exitcode.As(err).Reason != "unsafe_cache_entry" || !strings.Contains(err.Error(), unrecorded) {
				t.Fatalf("purge with an unrecorded .corrupt-* file: %v", err)
			}
		} else {
			res, err := Prune(context.Background(), root, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Kept) != 1 || res.Kept[0].Path != "d12/"+filepath.Base(unrecorded) {
				t.Fatalf("prune kept %+v, want the unrecorded file reported", res.Kept)
			}
			if _, err := os.Lstat(recorded); !os.IsNotExist(err) {
				t.Fatalf("prune did not delete the recorded set-aside file: %v", err)
			}
			if rec, err := readSetAside(dir); err != nil || len(rec) != 0 {
				t.Fatalf("record after prune: %+v %v", rec, err)
			}
		}
		if b, _ := os.ReadFile(unrecorded); string(b) != "MINE" {
			t.Fatalf("purge=%v deleted the unrecorded %s", purge, unrecorded)
		}
	}
	// Another file at the recorded name (a new inode): kept.
	root, _, id := tamperedCache(t)
	e, err := fixedCache(root, nil).Fetch(context.Background(), id, nil)
	if err != nil {
		t.Fatal(err)
	}
	recorded := filepath.Join(root.ImagesDir(), e.SetAside.Path)
	os.Remove(recorded)
	if err := os.WriteFile(recorded, []byte("REPLACED BY THE USER"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Prune(context.Background(), root, false); exitcode.As(err).Reason != "unsafe_cache_entry" {
		t.Fatalf("prune of a replaced set-aside file: %v, want unsafe_cache_entry", err)
	}
	if b, _ := os.ReadFile(recorded); string(b) != "REPLACED BY THE USER" {
		t.Fatal("prune deleted a file put at a recorded set-aside name")
	}
}

// TestUsersFileAtACachePathIsNeverDeleted: a file Barn did not publish
// at a cache path (the publication record names another identity there)
// is set aside so a fresh copy can be pulled, but neither prune nor
// purge deletes it: prune keeps and lists it, purge refuses naming it.
func TestUsersFileAtACachePathIsNeverDeleted(t *testing.T) {
	for _, purge := range []bool{false, true} {
		root, _, id := damagedCache(t)
		var progress bytes.Buffer
		e, err := fixedCache(root, &progress).Fetch(context.Background(), id, nil)
		if err != nil {
			t.Fatal(err)
		}
		if e.SetAside == nil || e.SetAside.Published {
			t.Fatalf("set-aside %+v: want the user's file recorded as not published by Barn", e.SetAside)
		}
		if n := e.SetAside.Notice(root.ImagesDir()); !strings.Contains(n, "prune keeps it") {
			t.Fatalf("notice %q does not say the file is kept", n)
		}
		aside := filepath.Join(root.ImagesDir(), e.SetAside.Path)
		if purge {
			if _, err := Purge(context.Background(), root, false); exitcode.As(err).Reason != "unsafe_cache_entry" || !strings.Contains(err.Error(), e.SetAside.Path) {
				t.Fatalf("purge with the user's set-aside file: %v", err)
			}
		} else {
			res, err := Prune(context.Background(), root, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Kept) != 1 || res.Kept[0].Path != e.SetAside.Path || res.Kept[0].Why != errForeignSetAside {
				t.Fatalf("prune kept %+v, want %s as not Barn's download", res.Kept, e.SetAside.Path)
			}
		}
		if b, _ := os.ReadFile(aside); string(b) != "THE USER'S OWN FILE" {
			t.Fatalf("purge=%v deleted the user's file set aside as %s", purge, aside)
		}
	}
}

// A set-aside record of another schema version — v1, which an earlier
// development build wrote without "published", or any other — is refused
// as integrity (7, dev_build_format) naming the file, never read; its
// next: hint, followed literally, lets prune run and keep the .corrupt-*
// file the record named.
func TestSetAsideRecordOfAnotherBuildIsRefused(t *testing.T) {
	for _, schema := range []string{"barn.images.set-aside/v1", "barn.images.set-aside/v3"} {
		t.Run(schema, func(t *testing.T) {
			root, p, id := tamperedCache(t)
			if _, err := fixedCache(root, nil).Fetch(context.Background(), id, nil); err != nil {
				t.Fatal(err)
			}
			rec := filepath.Join(root.ImagesDir(), setAsideName)
			b, err := os.ReadFile(rec)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(rec, []byte(strings.Replace(string(b), SetAsideSchema, schema, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err = Prune(context.Background(), root, false)
			e := exitcode.As(err)
			if e == nil || e.Class.Code() != 7 || e.Reason != "dev_build_format" || !strings.Contains(e.Message, rec) || !strings.Contains(e.Message, schema) {
				t.Fatalf("prune with a %s record: %#v", schema, e)
			}
			hint := strings.Fields(e.Next)
			if len(hint) < 5 || hint[0] != "mv" || hint[1] != "-n" || hint[2] != rec || hint[4] != "#" {
				t.Fatalf("next: %q, want mv -n %s TARGET   # why", e.Next, rec)
			}
			if _, err := os.Lstat(hint[3]); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("next: %q moves onto an existing path: %v", e.Next, err)
			}
			if err := os.Rename(hint[2], hint[3]); err != nil {
				t.Fatal(err)
			}
			res, err := Prune(context.Background(), root, false)
			if err != nil || len(res.Kept) != 1 {
				t.Fatalf("prune after %q: %+v %v", e.Next, res, err)
			}
			if _, err := os.Lstat(p + ".corrupt-20261202T150000Z"); err != nil {
				t.Fatal("prune deleted a file the unread record named: ", err)
			}
		})
	}
}

// A set-aside record that does not decode is an error, never "empty".
func TestBadSetAsideRecordIsAnError(t *testing.T) {
	root := pulledCache(t)
	if err := os.WriteFile(filepath.Join(root.ImagesDir(), setAsideName), []byte(`{"schema":"x"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Prune(context.Background(), root, true); exitcode.As(err).Reason != "bad_set_aside_record" {
		t.Fatalf("prune with a bad record: %v", err)
	}
}
