package imagecache

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
)

// The image cache's own records are read by one contract: absent is
// empty; another version of the same schema family is dev_build_format;
// anything else that does not decode, or that is not a regular file of a
// record's size, is the record's own reason and says why; all are
// integrity (7), name the file and give the one way out.
func TestCacheRecordsRefuseWhatTheyCannotRead(t *testing.T) {
	records := map[string]func(dir string) error{
		publishedName: func(dir string) error { _, err := readPublished(dir); return err },
		setAsideName:  func(dir string) error { _, err := readSetAside(dir); return err },
	}
	own := map[string]string{publishedName: "bad_published_record", setAsideName: "bad_set_aside_record"}
	family := map[string]string{publishedName: "barn.images.published", setAsideName: "barn.images.set-aside"}
	for name, read := range records {
		schema := map[string]string{publishedName: PublishedSchema, setAsideName: SetAsideSchema}[name]
		cases := map[string]struct{ body, reason, why string }{
			"absent":          {"", "", ""},
			"v0":              {`{"schema":"` + family[name] + `/v0","files":[]}`, "dev_build_format", "another development build"},
			"v9":              {`{"schema":"` + family[name] + `/v9"}`, "dev_build_format", "another development build"},
			"no schema":       {`{"files":{}}`, own[name], "no schema string"},
			"foreign schema":  {`{"schema":"barn.state.node/v1"}`, own[name], `field schema is "barn.state.node/v1"`},
			"not json":        {`{"schema":`, own[name], "line 1, column"},
			"unknown field":   {`{"schema":"` + schema + `","files":null,"x":1}`, own[name], "x"},
			"duplicate field": {`{"schema":"` + schema + `","files":null,"files":null}`, own[name], "files"},
			"oversized":       {`{"schema":"` + schema + `"` + strings.Repeat(" ", 4<<20) + `}`, own[name], "larger than"},
			"directory":       {"<dir>", own[name], "not a regular file"},
		}
		for what, c := range cases {
			t.Run(name+"/"+what, func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "images")
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				p := filepath.Join(dir, name)
				if c.body == "<dir>" {
					if err := os.Mkdir(p, 0o700); err != nil {
						t.Fatal(err)
					}
				} else if c.body != "" {
					if err := os.WriteFile(p, []byte(c.body), 0o600); err != nil {
						t.Fatal(err)
					}
				}
				err := read(dir)
				if c.reason == "" {
					if err != nil {
						t.Fatalf("absent record: %v", err)
					}
					return
				}
				e := exitcode.As(err)
				if e == nil || e.Class != exitcode.Integrity || e.Reason != c.reason || !strings.Contains(e.Message, p) || !strings.Contains(e.Message, c.why) ||
					!strings.HasPrefix(e.Next, "mv -n "+p+" "+filepath.Join(filepath.Dir(dir), name+".unread-")) {
					t.Fatalf("%s: got %#v, want integrity %s naming %s with an mv hint", c.body, e, c.reason, p)
				}
			})
		}
	}
}
