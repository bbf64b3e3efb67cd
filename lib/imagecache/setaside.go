package imagecache

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/fileid"
	"barn.dev/lib/safefile"
)

// SetAsideSchema is the schema of the set-aside record. Version 1 had no
// "published" field: its entries are read as not published (kept).
const SetAsideSchema = "barn.images.set-aside/v2"

const setAsideSchemaV1 = "barn.images.set-aside/v1"

// setAsideName is the set-aside record's file in the images directory.
const setAsideName = "set-aside.json"

// SetAside is one damaged cache file Ensure moved out of the way: where it
// went (Path), the cache path it was at (From), both relative to the images
// directory, its identity (lib/fileid, taken from the descriptor its
// verification read), when (UTC), the verification failure (Why) and
// whether it was the file Barn had published at From (Published, by the
// publication record). Prune and Purge delete a "<file>.corrupt-<UTC>"
// only when it was Barn's publication, and then only by this identity; a
// file someone else put at a cache path is set aside but never deleted.
type SetAside struct {
	Path      string    `json:"path"`
	From      string    `json:"from"`
	ID        fileid.ID `json:"id"`
	At        time.Time `json:"at"`
	Why       string    `json:"why"`
	Published bool      `json:"published"`
}

type setAsideRecord struct {
	Schema string     `json:"schema"`
	Files  []SetAside `json:"files"`
}

// readSetAside reads the record of imagesDir; a missing record is empty.
// A record that does not decode as this schema is an integrity error
// (reason "bad_set_aside_record"), never "empty".
func readSetAside(imagesDir string) ([]SetAside, error) {
	p := filepath.Join(imagesDir, setAsideName)
	data, _, err := safefile.ReadFile(p, 1<<20, nil)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "reading %s", p)
	}
	var r setAsideRecord
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	bad := func(why string) error {
		return exitcode.New(exitcode.Integrity, "%s: %s; Barn cannot tell which set-aside files it moved", p, why).
			WithReason("bad_set_aside_record").WithNext("move " + p + " out of the image cache; the .corrupt-* files it named are then kept")
	}
	if err := dec.Decode(&r); err != nil {
		return nil, bad(err.Error())
	}
	if r.Schema != SetAsideSchema && r.Schema != setAsideSchemaV1 {
		return nil, bad(fmt.Sprintf("field schema is %q, not %q", r.Schema, SetAsideSchema))
	}
	for i, f := range r.Files {
		if why := f.ID.Valid(); why != "" || f.Path == "" || !filepath.IsLocal(f.Path) {
			return nil, bad(fmt.Sprintf("files[%d]: path %q, id %s", i, f.Path, why))
		}
	}
	return r.Files, nil
}

// writeSetAside replaces the record of imagesDir with files (the caller
// holds the images lock).
func writeSetAside(imagesDir string, files []SetAside) error {
	if files == nil {
		files = []SetAside{}
	}
	b, err := json.MarshalIndent(setAsideRecord{Schema: SetAsideSchema, Files: files}, "", "  ")
	if err != nil {
		return err
	}
	p := filepath.Join(imagesDir, setAsideName)
	if err := safefile.Write(p, append(b, '\n'), 0o600); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "writing %s", p)
	}
	return nil
}

// setAside moves the damaged file at dest (identity fid, failure why) to
// "<dest>.corrupt-<now UTC>" without replacing anything there, and records
// it, with whether it is the file Barn published at dest. A file Barn
// could not identify is not moved.
func (c *Cache) setAside(dest string, fid fileid.ID, why error) (*SetAside, error) {
	if fid.Inode == 0 {
		return nil, exitcode.As(why).WithNext("move " + dest + " out of the image cache; Barn moves only a regular file it identified")
	}
	dir := c.Root.ImagesDir()
	at := c.Puller.defaults().Now().UTC()
	aside := dest + ".corrupt-" + at.Format("20060102T150405Z")
	files, err := readSetAside(dir)
	if err != nil {
		return nil, err
	}
	published, err := wasPublished(dir, dest, fid)
	if err != nil {
		return nil, err
	}
	if err := safefile.Move(dest, aside); err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "setting aside damaged %s", dest)
	}
	rel, _ := filepath.Rel(dir, aside)
	from, _ := filepath.Rel(dir, dest)
	s := SetAside{Path: rel, From: from, ID: fid, At: at, Why: exitcode.As(why).Message, Published: published}
	if err := writeSetAside(dir, append(files, s)); err != nil {
		return nil, err
	}
	return &s, nil
}
