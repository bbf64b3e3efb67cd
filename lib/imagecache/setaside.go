package imagecache

import (
	"fmt"
	"path/filepath"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/fileid"
	"barn.dev/lib/safefile"
)

// SetAsideSchema is the schema of the set-aside record.
const SetAsideSchema = "barn.images.set-aside/v2"

// setAsideName is the set-aside record's file in the images directory.
const setAsideName = "set-aside.json"

// setAsideFile is the set-aside record.
var setAsideFile = recordFile{
	name: setAsideName, schema: SetAsideSchema, limit: 1 << 20,
	reason: "bad_set_aside_record", loses: "which set-aside files it moved",
	moved: "the .corrupt-* files it named are then kept; delete them yourself once checked",
}

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
// A record Barn cannot read is an integrity error (recordFile.read),
// never "empty".
func readSetAside(imagesDir string) ([]SetAside, error) {
	var r setAsideRecord
	if err := setAsideFile.read(imagesDir, &r); err != nil {
		return nil, err
	}
	for i, f := range r.Files {
		if why := f.ID.Valid(); why != "" || f.Path == "" || !filepath.IsLocal(f.Path) {
			return nil, setAsideFile.damaged(imagesDir, fmt.Sprintf("files[%d]: path %q, id %s", i, f.Path, why))
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
	return setAsideFile.write(imagesDir, setAsideRecord{Schema: SetAsideSchema, Files: files})
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
