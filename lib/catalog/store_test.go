package catalog

import (
	"errors"
	"os"
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

func TestLoadSelectedWithoutCatalogIsErrNoCatalog(t *testing.T) {
	root := testRoot(t)
	_, err := LoadSelected(root, "/nonexistent/repo", "")
	if !errors.Is(err, imageref.ErrNoCatalog) {
		t.Fatalf("LoadSelected of a never-updated repo: %v, want ErrNoCatalog", err)
	}
	_, err = LoadSelected(root, "", "https://repo.example.test/barn")
	if !errors.Is(err, imageref.ErrNoCatalog) {
		t.Fatalf("LoadSelected of a never-updated BARN_REPO: %v, want ErrNoCatalog", err)
	}
}

// testKey returns a fresh minisign key pair: the secret key and the public
// key's text.
func testKey(t *testing.T) (minisign.PrivateKey, []byte, string) {
	t.Helper()
	secret, public, id, err := GenerateKey("")
	if err != nil {
		t.Fatal(err)
	}
	key, err := ParseSecretKey(secret, "")
	if err != nil {
		t.Fatal(err)
	}
	return key, public, id
}

func TestActivateSignedExplicitHTTPSAndLoadSelected(t *testing.T) {
	root := testRoot(t)
	st := &Store{Dir: root.ImagesDir()}
	key, public, id := testKey(t)
	if _, err := st.AddTrust(public); err != nil {
		t.Fatal(err)
	}
	data, _ := Encode(elCatalog())
	src, _ := ParseSource("http://repo.example.test/barn", true) // plain HTTP: signature required
	loc := src.CatalogLocation()
	if _, err := st.Activate(src, data, nil, ActivateOptions{ExactLocation: loc}); exitcode.As(err).Reason != "unsigned_catalog" {
		t.Fatalf("unsigned over plain HTTP: %v", err)
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
	if r := act.Record; r.KeyID != id || r.SignedBy != id || !r.SignatureRequired || r.ActiveRevision != 7 || r.HighestRevision != 7 {
		t.Fatalf("record %+v", r)
	}
	c, err := LoadSelected(root, "", src.Root)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Resolve("rocky@9", "amd64")
	if err != nil || got.Version != "9.10" {
		t.Fatalf("resolve via LoadSelected: %+v %v", got, err)
	}
	// A damaged stored catalog is an integrity error, never "no catalog".
	reg, _ := st.Registry()
	reg.Repositories[src.Key].ActiveDigest = strings.Repeat("0", 64)
	_ = st.writeRegistry(reg)
	if _, err := LoadSelected(root, "", src.Root); exitcode.ClassOf(err) != exitcode.Integrity || errors.Is(err, imageref.ErrNoCatalog) {
		t.Fatalf("damaged active catalog: %v", err)
	}
}

func TestSelectPrecedence(t *testing.T) {
	s, err := Select("/flag", true, "/env")
	if err != nil || s.Root != "/flag" || !s.Explicit || s.Official {
		t.Fatalf("--repo: %+v %v", s, err)
	}
	s, _ = Select("", true, "/env")
	if s.Root != MirrorRoot || !s.Official || s.Key != OfficialSlot || !s.RequiresSignature() {
		t.Fatalf("--mirror: %+v", s)
	}
	s, _ = Select("", false, "/env")
	if s.Root != "/env" || !s.Explicit || s.RequiresSignature() {
		t.Fatalf("BARN_REPO: %+v", s)
	}
	s, _ = Select("", false, "")
	if s.Root != OfficialRoot || !s.Official || s.Key != OfficialSlot || s.Explicit || !s.RequiresSignature() {
		t.Fatalf("compiled default: %+v", s)
	}
	if alt := s.Alternates(); len(alt) != 1 || alt[0].Root != MirrorRoot || alt[0].Key != OfficialSlot {
		t.Fatalf("official alternates: %+v", alt)
	}
	// The official repository named explicitly, in any spelling, is still
	// the official repository: same slot, signature always required.
	for _, loc := range []string{"https://repo.pigsty.io/barn/", "HTTPS://Repo.Pigsty.CC/barn", "https://repo.pigsty.io:443/barn", "https://repo.pigsty.io//barn/./"} {
		s, err := ParseSource(loc, true)
		if err != nil || !s.Official || s.Key != OfficialSlot || !s.RequiresSignature() {
			t.Fatalf("ParseSource(%q) = %+v, %v", loc, s, err)
		}
	}
	a, _ := ParseSource("http://Repo.Test:80/a/../lab/", true)
	b, _ := ParseSource("http://repo.test/lab", true)
	if a.Root != "http://repo.test/lab" || a.Key != b.Key {
		t.Fatalf("one repository, two records: %+v %+v", a, b)
	}
	h, _ := ParseSource("http://127.0.0.1:1/repo", true)
	if !h.RequiresSignature() || h.Alternates() != nil {
		t.Fatal("explicit plain HTTP must still require a signature and has no alternates")
	}
	for _, bad := range []string{"relative/dir", "https://u:p@x/", "https://x/?q", "ftp://x/"} {
		if _, err := ParseSource(bad, true); exitcode.ClassOf(err) != exitcode.Usage {
			t.Errorf("ParseSource(%q): %v", bad, err)
		}
	}
}

// TestRegistryVersions: the registry this Barn writes reads back; any
// other schema, and what development builds wrote (a configured default
// repository, a record under a non-canonical spelling of its repository),
// is refused as integrity (7) naming the file, with the way out.
func TestRegistryVersions(t *testing.T) {
	root := testRoot(t)
	st := &Store{Dir: root.ImagesDir()}
	lab, err := ParseSource("https://lab.example/repo", true)
	if err != nil {
		t.Fatal(err)
	}
	current := &Registry{Schema: RegistrySchema, Repositories: map[string]*Record{
		lab.Key: {Source: lab.Root, HighestRevision: 3, Accepted: map[string]string{}}}}
	if err := st.writeRegistry(current); err != nil {
		t.Fatal(err)
	}
	if reg, err := st.Registry(); err != nil || reg.Repositories[lab.Key] == nil || reg.Repositories[lab.Key].HighestRevision != 3 {
		t.Fatalf("current registry: %+v, %v", reg, err)
	}
	p := st.registryPath()
	for name, doc := range map[string]string{
		"older schema":               `{"schema":"barn.catalog.registry/v0","repositories":{}}`,
		"newer schema":               `{"schema":"barn.catalog.registry/v2","repositories":{}}`,
		"no schema":                  `{"repositories":{}}`,
		"configured default":         `{"schema":"barn.catalog.registry/v1","default_repo":"/srv/lab-repo","repositories":{}}`,
		"non-canonical spelling key": `{"schema":"barn.catalog.registry/v1","repositories":{"` + slotKey("https://lab.example:0443/repo") + `":{"source":"https://lab.example:0443/repo","highest_revision":1,"active":"","active_revision":0,"active_digest":"","key_id":"","accepted_at":"0001-01-01T00:00:00Z","downgrade":false,"accepted":{},"signature_required":false}}}`,
	} {
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := st.Registry()
		e := exitcode.As(err)
		if e == nil || e.Class != exitcode.Integrity || !strings.Contains(e.Message, p) || e.Next != RegistryReset(p) {
			t.Fatalf("%s: %#v, want integrity naming %s with next %q", name, e, p, RegistryReset(p))
		}
		if name == "non-canonical spelling key" && e.Reason != "dev_build_format" {
			t.Errorf("%s: reason %q, want dev_build_format", name, e.Reason)
		}
	}
}

// TestTrustDirectoryMustBePrivate: trust/ is created 0700; one another
// user could write (0755 here) is no evidence of whom the user trusts, so
// listing and adding keys refuse it (integrity) and change nothing.
func TestTrustDirectoryMustBePrivate(t *testing.T) {
	root := testRoot(t)
	st := &Store{Dir: root.ImagesDir()}
	_, public, _ := testKey(t)
	if _, err := st.AddTrust(public); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(st.trustDir()); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("trust dir created %v, %v", fi.Mode(), err)
	}
	if err := os.Chmod(st.trustDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := st.TrustedKeys(); exitcode.ClassOf(err) != exitcode.Integrity || !strings.Contains(err.Error(), "0755") {
		t.Fatalf("TrustedKeys with an open trust dir: %v", err)
	}
	_, other, _ := testKey(t)
	if _, err := st.AddTrust(other); exitcode.ClassOf(err) != exitcode.Integrity {
		t.Fatalf("AddTrust into an open trust dir: %v", err)
	}
	if fi, _ := os.Stat(st.trustDir()); fi.Mode().Perm() != 0o755 {
		t.Fatal("the trust dir's mode was changed")
	}
}
