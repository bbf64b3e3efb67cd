package catalog

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestOwnedFilesProvesByBytes: the store files Barn wrote are proven by
// their bytes (registry, digest, the signature's key and trusted comment,
// the key's canonical text); the same names with other bytes are not.
func TestOwnedFilesProvesByBytes(t *testing.T) {
	root := testRoot(t)
	st := &Store{Dir: root.ImagesDir()}
	key, public, id := testKey(t)
	if _, err := st.AddTrust(public); err != nil {
		t.Fatal(err)
	}
	data, _ := Encode(elCatalog())
	src, _ := ParseSource("http://repo.example.test/barn", true)
	if _, err := st.Activate(src, data, Sign(key, data, 7), ActivateOptions{ExactLocation: src.CatalogLocation()}); err != nil {
		t.Fatal(err)
	}
	owned, err := st.OwnedFiles()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for p := range owned {
		rel, _ := filepath.Rel(st.Dir, p)
		got = append(got, rel)
	}
	sort.Strings(got)
	if len(got) != 4 || got[0] != "manifests/state.json" || !strings.HasSuffix(got[2], ".json."+strings.ToLower(id)+".minisig") || got[3] != "trust/"+id+".pub" {
		t.Fatalf("owned = %v", got)
	}
	sig := filepath.Join(st.Dir, got[2])
	keyFile := filepath.Join(st.Dir, got[3])

	// a signature of other bytes (here: another revision's comment) and a
	// key file with anything added are not the files Barn wrote
	if err := os.WriteFile(sig, Sign(key, data, 8), 0o600); err != nil {
		t.Fatal(err)
	}
	text, _ := os.ReadFile(keyFile)
	if err := os.WriteFile(keyFile, append(text, "# mine\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	owned, err = st.OwnedFiles()
	if err != nil {
		t.Fatal(err)
	}
	if owned[sig] || owned[keyFile] || len(owned) != 2 {
		t.Fatalf("owned after replacing the signature and the key file: %v", owned)
	}
}
