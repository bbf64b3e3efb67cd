package imagecache

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/quote"
	"barn.dev/lib/safefile"
	"barn.dev/lib/wire"
)

// recordFile is one of the image cache's own JSON documents in the images
// directory (published.json, set-aside.json): the one place that reads,
// verifies and writes them.
type recordFile struct {
	name   string // file name in the images directory
	schema string // the one schema this Barn reads and writes, "<family>/vN"
	limit  int64  // largest record read, in bytes
	reason string // integrity reason of a record that does not decode
	loses  string // what Barn cannot tell without the record
	moved  string // what follows once the record is moved out of the cache
}

// read decodes the record of imagesDir strictly (lib/wire) into v, a
// pointer to the record's struct, leaving v alone when there is none. A
// record of the same schema family in another version was written by
// another development build of Barn: integrity (7), reason
// "dev_build_format". Any other record that does not decode as this
// schema, and a record that is not a regular file or is larger than
// c.limit, is integrity (7), reason c.reason, never read as empty. Both
// name the file and the way out (next).
func (c recordFile) read(imagesDir string, v any) error {
	p := filepath.Join(imagesDir, c.name)
	data, _, err := safefile.ReadFile(p, c.limit, nil)
	switch got := wire.SchemaOf(data); {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case errors.Is(err, safefile.ErrNotRegular), errors.Is(err, safefile.ErrTooLarge):
		return c.damaged(imagesDir, err.Error())
	case err != nil:
		return exitcode.Wrap(exitcode.Runtime, err, "reading %s", p)
	case got != c.schema && family(got) == family(c.schema):
		return exitcode.New(exitcode.Integrity, "%s has schema %s, written by another development build of Barn; this Barn reads only %s, so it cannot tell %s",
			p, got, c.schema, c.loses).WithReason("dev_build_format").WithNext(c.next(imagesDir))
	case got == "":
		return c.damaged(imagesDir, noSchema(data))
	case got != c.schema:
		return c.damaged(imagesDir, fmt.Sprintf("field schema is %q, not %q", got, c.schema))
	}
	if err := wire.DecodeStrict(data, v); err != nil {
		return c.damaged(imagesDir, err.Error())
	}
	return nil
}

// noSchema says why data has no schema string: the JSON decoder's
// error (with its line and column) when data is not a JSON object.
func noSchema(data []byte) string {
	var probe map[string]any
	if err := wire.DecodeStrict(data, &probe); err != nil {
		return err.Error()
	}
	return "it has no schema string"
}

// damaged is the integrity error of a record of imagesDir that Barn
// cannot read, for the reason why.
func (c recordFile) damaged(imagesDir, why string) error {
	p := filepath.Join(imagesDir, c.name)
	return exitcode.New(exitcode.Integrity, "%s: %s; Barn cannot tell %s", p, why, c.loses).
		WithReason(c.reason).WithNext(c.next(imagesDir))
}

// next is the one way out of an unreadable record: move it out of the
// image cache into the directory above it (where nothing reads it), under
// a name stamped with the time (mv -n: never over another file), after
// which the cache starts a new record. The command pastes as is; what
// moving it means follows as a shell comment.
func (c recordFile) next(imagesDir string) string {
	from := filepath.Join(imagesDir, c.name)
	to := filepath.Join(filepath.Dir(imagesDir), c.name+".unread-"+time.Now().UTC().Format("20060102T150405Z"))
	return fmt.Sprintf("mv -n %s %s   # %s", quote.ShellIfNeeded(from), quote.ShellIfNeeded(to), c.moved)
}

// write replaces the record of imagesDir with v (the caller holds the
// images lock).
func (c recordFile) write(imagesDir string, v any) error {
	b, err := wire.MarshalIndent(v)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "encoding %s", c.name)
	}
	p := filepath.Join(imagesDir, c.name)
	if err := safefile.Write(p, append(b, '\n'), 0o600); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "writing %s", p)
	}
	return nil
}

// family is schema s without its version: "barn.images.published" of
// "barn.images.published/v1".
func family(s string) string {
	f, _, _ := strings.Cut(s, "/v")
	return f
}
