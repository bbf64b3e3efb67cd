package catalog

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"aead.dev/minisign"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/imageref"
	"barn.dev/lib/state"
)

func testRoot(t *testing.T) *state.Root {
	t.Helper()
	home := filepath.Join(t.TempDir(), "barn")
	root, err := state.Open(func(k string) string {
		if k == "BARN_HOME" {
			return home
		}
		if k == "HOME" {
			return filepath.Dir(home)
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func TestLoadActiveWithoutCatalogIsErrNoCatalog(t *testing.T) {
	root := testRoot(t)
	_, err := LoadActive(root)
	if !errors.Is(err, imageref.ErrNoCatalog) {
		t.Fatalf("LoadActive on an empty root: %v, want ErrNoCatalog", err)
	}
	_, err = LoadSelected(root, "/nonexistent/repo", "")
	if !errors.Is(err, imageref.ErrNoCatalog) {
		t.Fatalf("LoadSelected of a never-updated repo: %v, want ErrNoCatalog", err)
	}
}

func TestActivateSignedDefaultAndLoadActive(t *testing.T) {
	root := testRoot(t)
	st := &Store{Dir: root.ImagesDir()}
	secret, public, id, err := GenerateKey("")
	if err != nil {
		t.Fatal(err)
	}
	key, err := ParseSecretKey(secret, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddTrust(public); err != nil {
		t.Fatal(err)
	}
	data, _ := Encode(elCatalog())
	src, _ := ParseSource("https://repo.example.test/barn", false) // configured default: signature required
	loc := src.CatalogLocation()
	if _, err := st.Activate(src, data, nil, ActivateOptions{ExactLocation: loc}); exitcode.As(err).Reason != "unsigned_catalog" {
		t.Fatalf("unsigned default: %v", err)
	}
	big := make([]byte, MaxSignatureBytes+1)
	if _, err := st.Activate(src, data, big, ActivateOptions{ExactLocation: loc}); exitcode.As(err).Reason != "signature_too_large" {
		t.Fatalf("oversized signature: %v", err)
	}
	wrongComment := minisign.SignWithComments(key, data, "barn-catalog revision:6 sha256:x", "")
	if _, err := st.Activate(src, data, wrongComment, ActivateOptions{ExactLocation: loc}); exitcode.As(err).Reason != "signature_comment_mismatch" {
		t.Fatalf("comment naming another revision: %v", err)
	}
	act, err := st.Activate(src, data, Sign(key, data, 7), ActivateOptions{ExactLocation: loc})
	if err != nil {
		t.Fatal(err)
	}
	if act.Record.KeyID != id || act.Record.ActiveRevision != 7 || act.Record.HighestRevision != 7 {
		t.Fatalf("record %+v", act.Record)
	}
	if err := st.SetDefault(src.Root); err != nil {
		t.Fatal(err)
	}
	c, err := LoadActive(root)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Resolve("rocky@9", "amd64")
	if err != nil || got.Version != "9.10" {
		t.Fatalf("resolve via LoadActive: %+v %v", got, err)
	}
	// A damaged stored catalog is an integrity error, never "no catalog".
	reg, _ := st.Registry()
	reg.Repositories[src.Key].ActiveDigest = strings.Repeat("0", 64)
	_ = st.writeRegistry(reg)
	if _, err := LoadActive(root); exitcode.ClassOf(err) != exitcode.Integrity || errors.Is(err, imageref.ErrNoCatalog) {
		t.Fatalf("damaged active catalog: %v", err)
	}
}

func TestSelectPrecedence(t *testing.T) {
	s, err := Select("/flag", "/env", "https://default.example.test")
	if err != nil || s.Root != "/flag" || !s.Explicit {
		t.Fatalf("flag: %+v %v", s, err)
	}
	s, _ = Select("", "/env", "https://default.example.test")
	if s.Root != "/env" || !s.Explicit || s.RequiresSignature() {
		t.Fatalf("env: %+v", s)
	}
	s, _ = Select("", "", "https://default.example.test/")
	if s.Root != "https://default.example.test" || s.Explicit || !s.RequiresSignature() {
		t.Fatalf("default: %+v", s)
	}
	s, _ = Select("https://default.example.test", "", "https://default.example.test/")
	if s.Explicit || !s.RequiresSignature() {
		t.Fatalf("the default named by --repo must still need a signature: %+v", s)
	}
	if _, err := Select("", "", ""); !errors.Is(err, ErrNoRepository) {
		t.Fatalf("none: %v", err)
	}
	h, _ := ParseSource("http://127.0.0.1:1/repo", true)
	if !h.RequiresSignature() {
		t.Fatal("explicit plain HTTP must still require a signature")
	}
	for _, bad := range []string{"relative/dir", "https://u:p@x/", "https://x/?q", "ftp://x/"} {
		if _, err := ParseSource(bad, true); exitcode.ClassOf(err) != exitcode.Usage {
			t.Errorf("ParseSource(%q): %v", bad, err)
		}
	}
}
