package imagecache

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/fileid"
	"barn.dev/lib/safefile"
)

// PublishedSchema is the schema of the publication record.
const PublishedSchema = "barn.images.published/v1"

// publishedName is the publication record's file in the images directory.
const publishedName = "published.json"

// publishedRecord is published.json: for each cache path (relative to
// the images directory) the lib/fileid identity of the file Barn last
// published there after verifying it. A file at a cache path is one Barn
// downloaded only while it is that identity; anything else there (a file
// a user put at the path) is never deleted on the strength of its name.
type publishedRecord struct {
	Schema string               `json:"schema"`
	Files  map[string]fileid.ID `json:"files"`
}

// readPublished reads the publication record of imagesDir: empty when
// there is none, an integrity error (reason "bad_published_record") when
// it does not decode as this schema, never "empty".
func readPublished(imagesDir string) (map[string]fileid.ID, error) {
	p := filepath.Join(imagesDir, publishedName)
	data, _, err := safefile.ReadFile(p, 4<<20, nil)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]fileid.ID{}, nil
	}
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "reading %s", p)
	}
	var r publishedRecord
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	bad := func(why string) error {
		return exitcode.New(exitcode.Integrity, "%s: %s; Barn cannot tell which cached images it downloaded", p, why).
			WithReason("bad_published_record").WithNext("move " + p + " out of the image cache; files it named are then never deleted as Barn's")
	}
	if err := dec.Decode(&r); err != nil {
		return nil, bad(err.Error())
	}
	if r.Schema != PublishedSchema {
		return nil, bad(fmt.Sprintf("field schema is %q, not %q", r.Schema, PublishedSchema))
	}
	for rel, id := range r.Files {
		if why := id.Valid(); why != "" || !filepath.IsLocal(rel) {
			return nil, bad(fmt.Sprintf("files[%q]: %s", rel, why))
		}
	}
	if r.Files == nil {
		r.Files = map[string]fileid.ID{}
	}
	return r.Files, nil
}

// notePublished records the file now at dest (which Barn just published,
// under the images lock) in the publication record of imagesDir.
func notePublished(imagesDir, dest string) error {
	files, err := readPublished(imagesDir)
	if err != nil {
		return err
	}
	id, err := fileid.Of(dest)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "recording %s", dest)
	}
	rel, err := filepath.Rel(imagesDir, dest)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "recording %s", dest)
	}
	files[rel] = id
	b, err := json.MarshalIndent(publishedRecord{Schema: PublishedSchema, Files: files}, "", "  ")
	if err != nil {
		return err
	}
	p := filepath.Join(imagesDir, publishedName)
	if err := safefile.Write(p, append(b, '\n'), 0o600); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "writing %s", p)
	}
	return nil
}

// wasPublished reports whether fid (a file found at cache path dest) is
// the file the publication record says Barn published there.
func wasPublished(imagesDir, dest string, fid fileid.ID) (bool, error) {
	files, err := readPublished(imagesDir)
	if err != nil {
		return false, err
	}
	rel, err := filepath.Rel(imagesDir, dest)
	if err != nil {
		return false, nil
	}
	return files[rel].Same(fid), nil
}
