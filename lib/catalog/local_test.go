package catalog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
)

// TestLocalRegistryVersions: the import registry reads its own schema and
// refuses any other (older, newer or none) as integrity naming the file.
func TestLocalRegistryVersions(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "local-images.json")
	if err := os.WriteFile(p, []byte(`{"schema":"`+LocalSchema+`","images":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if reg, err := ReadLocal(dir); err != nil || reg.Schema != LocalSchema {
		t.Fatalf("current import registry: %+v, %v", reg, err)
	}
	for _, doc := range []string{
		`{"schema":"barn.images.local/v0","images":{}}`,
		`{"schema":"barn.images.local/v2","images":{}}`,
		`{"images":{}}`,
	} {
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := ReadLocal(dir)
		if e := exitcode.As(err); e == nil || e.Class != exitcode.Integrity || !strings.Contains(e.Message, p) || !strings.Contains(e.Message, "schema") {
			t.Errorf("%s: %v, want integrity naming %s and the schema", doc, err, p)
		}
	}
}
