package catalog

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
)

// familyNamed is elCatalog with its family renamed (and made the default).
func familyNamed(name string) *Catalog {
	c := elCatalog()
	c.Images[name] = c.Images["el"]
	delete(c.Images, "el")
	c.Defaults.Image = name
	return c
}

// snapshot is every entry under dir: path → mode and bytes.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		b := []byte{}
		if fi.Mode().IsRegular() {
			if b, err = os.ReadFile(p); err != nil {
				return err
			}
		}
		out[p] = fi.Mode().String() + " " + string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFamiliesCannotBeNamedLikeTheStore: an image (or alias) named like a
// directory of the catalog store — the cache keeps family <f> in
// <images>/<f> beside <images>/manifests and <images>/trust — is refused
// when the catalog is parsed, naming the file, line, field and value, and
// activating such a catalog touches no file of the store.
func TestFamiliesCannotBeNamedLikeTheStore(t *testing.T) {
	for _, name := range StoreDirNames {
		t.Run(name, func(t *testing.T) {
			yaml := "schema: 1\nrevision: 1\ndefaults: {image: " + name + ", channel: stable, arch: native, boot: bios}\nimages:\n  " + name +
				":\n    channels: {stable: \"1\"}\n    versions:\n      \"1\": {variants: {amd64: {source_user: debian}}}\n"
			_, err := DecodeRepo([]byte(yaml), "repo/repo.yaml")
			if err == nil {
				t.Fatalf("repo.yaml with image %s decodes", name)
			}
			e := exitcode.As(err)
			if e.Class != exitcode.Usage || !strings.Contains(e.Message, "repo/repo.yaml: line 5: images."+name+": image name must match") ||
				!strings.Contains(e.Message, `(value "`+name+`")`) {
				t.Fatalf("repo.yaml with image %s: %v", name, err)
			}
			aliased := strings.Replace(strings.Replace(yaml, "image: "+name, "image: d12", 1), "  "+name+":\n", "  d12:\n    aliases: ["+name+"]\n", 1)
			if _, err := DecodeRepo([]byte(aliased), "repo.yaml"); err == nil || !strings.Contains(exitcode.As(err).Message, "images.d12.aliases[0]: alias must match") {
				t.Fatalf("repo.yaml with alias %s: %v", name, err)
			}

			data, err := Encode(elCatalog())
			if err != nil {
				t.Fatal(err)
			}
			root := testRoot(t)
			st := &Store{Dir: root.ImagesDir()}
			_, public, _ := testKey(t)
			if _, err := st.AddTrust(public); err != nil {
				t.Fatal(err)
			}
			src, _ := ParseSource(t.TempDir(), true)
			if _, err := st.Activate(src, data, nil, ActivateOptions{ExactLocation: src.CatalogLocation()}); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, root.ImagesDir())

			bad := familyNamed(name)
			if ps := bad.Validate(); len(ps) == 0 {
				t.Fatalf("a catalog with image %s validates", name)
			}
			badData, err := Encode(bad)
			if err != nil {
				t.Fatal(err)
			}
			_, err = st.Activate(src, badData, nil, ActivateOptions{ExactLocation: src.CatalogLocation()})
			if err == nil {
				t.Fatalf("a catalog with image %s was activated", name)
			}
			e = exitcode.As(err)
			if e.Class != exitcode.Integrity || e.Reason != "invalid_catalog" || !strings.Contains(e.Message, src.CatalogLocation()+": images."+name+": image name") {
				t.Fatalf("activating a catalog with image %s: %v", name, err)
			}
			after := snapshot(t, root.ImagesDir())
			if len(after) != len(before) {
				t.Fatalf("the store changed: %d entries before, %d after", len(before), len(after))
			}
			for p, v := range before {
				if after[p] != v {
					t.Fatalf("%s changed", p)
				}
			}
		})
	}
}
