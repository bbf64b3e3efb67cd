package imagecache

import (
	"path/filepath"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/fileid"
)

// PublishedSchema is the schema of the publication record.
const PublishedSchema = "barn.images.published/v1"

// publishedName is the publication record's file in the images directory.
const publishedName = "published.json"

// publishedFile is the publication record.
var publishedFile = recordFile{
	name: publishedName, schema: PublishedSchema, limit: 4 << 20,
	reason: "bad_published_record", loses: "which cached images it downloaded",
	moved: "files it named are then never deleted as Barn's",
}

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
// there is none, an integrity error (recordFile.read) when Barn cannot
// read it, never "empty".
func readPublished(imagesDir string) (map[string]fileid.ID, error) {
	var r publishedRecord
	if err := publishedFile.read(imagesDir, &r); err != nil {
		return nil, err
	}
	for rel, id := range r.Files {
		if why := id.Valid(); why != "" || !filepath.IsLocal(rel) {
			return nil, publishedFile.damaged(imagesDir, "files["+rel+"]: "+why)
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
	return publishedFile.write(imagesDir, publishedRecord{Schema: PublishedSchema, Files: files})
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
