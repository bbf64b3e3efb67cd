package catalog

import (
	"errors"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/imageref"
	"barn.dev/lib/wire/wiretest"
)

func variant(file string) Variant {
	return Variant{File: file, SHA256: strings.Repeat("a", 64), Format: "qcow2", ArtifactSize: 1000, VirtualSize: 1 << 30,
		SourceUser: "rocky", Boot: "uefi", Status: "supported"}
}

// elCatalog has versions 9.3, 9.9, 9.10 and 10.0 under one family.
func elCatalog() *Catalog {
	versions := map[string]Version{}
	for _, v := range []string{"9.3", "9.9", "9.10", "10.0"} {
		versions[v] = Version{Status: "supported", Variants: map[string]Variant{
			"amd64": variant("images/el-" + v + "-amd64.qcow2"),
			"arm64": variant("images/el-" + v + "-arm64.qcow2"),
		}}
	}
	return &Catalog{Schema: CatalogSchema, Revision: 7, Defaults: Defaults{Image: "el", Channel: "stable", Arch: "native", Boot: "uefi"},
		Images: map[string]Image{"el": {Aliases: []string{"rocky"}, Boot: "uefi", Channels: map[string]string{"stable": "9.10", "old": "9.3"}, Versions: versions}}}
}

// Small input 3: @9 → 9.10; @9.1 → unknown (not a prefix on a component
// boundary); exact keys win; channels and aliases resolve.
func TestResolveSelectors(t *testing.T) {
	c := elCatalog()
	if ps := c.Validate(); len(ps) != 0 {
		t.Fatalf("test catalog invalid: %v", ps)
	}
	for _, tc := range []struct{ sel, version string }{
		{"el@9", "9.10"},
		{"el@9.9", "9.9"},
		{"el@9.10", "9.10"},
		{"el@10", "10.0"},
		{"el", "9.10"},
		{"el:stable", "9.10"},
		{"el:old", "9.3"},
		{"rocky@9", "9.10"},
		{"rocky:old", "9.3"},
	} {
		id, err := c.Resolve(tc.sel, "arm64")
		if err != nil {
			t.Fatalf("Resolve(%q): %v", tc.sel, err)
		}
		if id.Version != tc.version || id.Image != "el" || id.Arch != "arm64" || id.Selector != tc.sel ||
			id.File != "images/el-"+tc.version+"-arm64.qcow2" || id.SizeBytes != 1000 || id.Boot != "uefi" {
			t.Fatalf("Resolve(%q) = %+v, want version %s", tc.sel, id, tc.version)
		}
	}
	for _, sel := range []string{"el@9.1", "el@1", "el@90", "el:nightly", "nope", "el@", "EL", "local-x"} {
		_, err := c.Resolve(sel, "amd64")
		e := exitcode.As(err)
		if err == nil || e.Class != exitcode.Usage || e.Reason != "unknown_image" {
			t.Fatalf("Resolve(%q) = %v, want usage unknown_image", sel, err)
		}
	}
	if _, err := c.Resolve("el", "riscv64"); exitcode.As(err).Reason != "unknown_image" {
		t.Fatalf("unknown arch: %v", err)
	}
	id, err := c.Resolve("el", "native")
	if err != nil || id.Arch != NativeArch() {
		t.Fatalf("native arch: %+v %v", id, err)
	}
	var r imageref.Resolver = c
	_ = r
}

func TestCompareVersions(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"9.10", "9.9", 1}, {"9.9", "9.10", -1}, {"9.7", "9.7.0", 0}, {"09.7", "9.7", 0},
		{"10.0", "9.10", 1}, {"20260923.2610.1", "20260914.2601.2", 1}, {"9.rc1", "9.1", -1}, {"a", "b", -1},
		{"99999999999999999999999.1", "99999999999999999999998.9", 1},
	} {
		if got := CompareVersions(tc.a, tc.b); got != tc.want {
			t.Errorf("CompareVersions(%q,%q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
	if MatchesPrefix("90.1", "9") || MatchesPrefix("9.10", "9.1") || !MatchesPrefix("9.10", "9") || !MatchesPrefix("9", "9") {
		t.Fatal("MatchesPrefix is not on a component boundary")
	}
}

func TestCheckUpstream(t *testing.T) {
	ok := "https://cloud.debian.org/images/cloud/bookworm/20250101-1/debian-12-genericcloud-amd64-20250101-1.qcow2"
	if err := CheckUpstream(ok); err != nil {
		t.Fatalf("%s: %v", ok, err)
	}
	for _, bad := range []string{
		"http://x.org/a.qcow2", "https://u:p@x.org/a.qcow2", "https://x.org/a.qcow2?v=1", "https://x.org/a.qcow2#f",
		"https://x.org/latest/a.qcow2", "https://x.org/current/a.qcow2", "https://x.org/release/a.qcow2",
		"https://x.org/a.latest.qcow2", "https:///a.qcow2", "ftp://x.org/a",
	} {
		if err := CheckUpstream(bad); err == nil {
			t.Errorf("CheckUpstream(%q) accepted", bad)
		}
	}
}

func TestCatalogValidation(t *testing.T) {
	c := elCatalog()
	v := c.Images["el"].Versions["9.3"]
	va := v.Variants["amd64"]
	va.SHA256 = "ABC"
	va.ArtifactSize = MaxArtifactBytes + 1
	va.File = "../etc/passwd.qcow2"
	v.Variants["amd64"] = va
	c.Images["el"].Versions["9.3"] = v
	c.Images["el"].Versions["9.3.0"] = Version{Status: "bogus", Variants: map[string]Variant{"amd64": variant("images/x.qcow2")}}
	fields := map[string]bool{}
	for _, p := range c.Validate() {
		fields[p.Field] = true
	}
	for _, want := range []string{
		"images.el.versions.9.3.variants.amd64.sha256", "images.el.versions.9.3.variants.amd64.artifact_size",
		"images.el.versions.9.3.variants.amd64.file", "images.el.versions.9.3.0", "images.el.versions.9.3.0.status",
	} {
		if !fields[want] {
			t.Errorf("no problem reported for %s (got %v)", want, fields)
		}
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	c := elCatalog()
	b, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	d, err := DecodeCatalog(b, "catalog.json")
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := Encode(d)
	if string(b) != string(b2) {
		t.Fatal("encoding is not stable across a round trip")
	}
	for name, data := range map[string]string{
		"unknown field": strings.Replace(string(b), `"revision"`, `"extra": 1, "revision"`, 1),
		"trailing":      string(b) + "{}",
		"too large":     strings.Repeat(" ", MaxCatalogBytes+1),
	} {
		_, err := DecodeCatalog([]byte(data), "catalog.json")
		if exitcode.ClassOf(err) != exitcode.Integrity {
			t.Errorf("%s: %v, want integrity", name, err)
		}
	}
}

func TestDecodeRepoDefaults(t *testing.T) {
	r, err := DecodeRepo([]byte(`schema: 1
revision: 3
defaults: {image: d12, channel: stable, arch: native, boot: bios}
images:
  d12:
    aliases: [debian12, bookworm]
    channels: {stable: "20250101.1"}
    versions:
      "20250101.1":
        variants:
          amd64: {source_user: debian}
`), "repo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if r.Revision != 3 || r.Images["d12"].Versions["20250101.1"].Variants["amd64"].SourceUser != "debian" {
		t.Fatalf("decoded %+v", r)
	}
	_, err = DecodeRepo([]byte("schema: 1\nrevision: -1\n"), "repo.yaml")
	if e := exitcode.As(err); e.Class != exitcode.Usage || !strings.Contains(e.Message, "repo.yaml: line 2") {
		t.Fatalf("negative revision: %v", err)
	}
	if !errors.Is(imageref.ErrNoCatalog, imageref.ErrNoCatalog) {
		t.Fatal()
	}
}

func FuzzDecodeRepo(f *testing.F) {
	f.Add([]byte("schema: 1\nrevision: 1\ndefaults: {image: d12, channel: stable, arch: native, boot: bios}\nimages:\n  d12:\n    channels: {stable: \"1\"}\n    versions:\n      \"1\": {variants: {amd64: {source_user: debian}}}\n"))
	f.Add([]byte("schema: 1\n---\nschema: 2\n"))
	f.Add([]byte("a: &x [*x]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeRepo(data, "repo.yaml")
		if err != nil {
			if exitcode.ClassOf(err) != exitcode.Usage {
				t.Fatalf("error of class %s, want usage", exitcode.ClassOf(err))
			}
			return
		}
		if len(r.Validate()) != 0 || r.Schema != RepoSchema || r.Revision == 0 {
			t.Fatalf("accepted an invalid repo.yaml: %+v", r)
		}
	})
}

func FuzzDecodeCatalog(f *testing.F) {
	b, _ := Encode(elCatalog())
	f.Add(b)
	f.Add([]byte(`{"schema":3}`))
	f.Add([]byte(`{"schema":3,"revision":1,"defaults":{"image":"x","channel":"stable","arch":"native","boot":"bios"},"images":{}}`))
	f.Add(OfficialRepository().Catalog)
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeCatalog(data, "catalog.json")
		if err != nil {
			if exitcode.ClassOf(err) != exitcode.Integrity {
				t.Fatalf("error of class %s, want integrity", exitcode.ClassOf(err))
			}
			return
		}
		// Whatever layout was accepted, Barn's encoding of it is stable.
		enc, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeCatalog(enc, "re-encoded")
		if err != nil {
			t.Fatalf("re-encoded catalog refused: %v", err)
		}
		if enc2, _ := Encode(again); string(enc2) != string(enc) {
			t.Fatal("encoding is not stable")
		}
		// Accepted catalogs resolve their defaults and every identity is complete.
		if _, err := c.Resolve(c.Defaults.Image, "amd64"); err != nil && exitcode.As(err).Reason != "unknown_image" {
			t.Fatalf("default does not resolve: %v", err)
		}
		for _, id := range c.Identities() {
			if id.SHA256 == "" || id.SizeBytes <= 0 || id.File == "" {
				t.Fatalf("incomplete identity %+v", id)
			}
		}
	})
}

// TestDecodeCatalogRefusesDuplicateAndCaseVariantNames: a catalog that
// repeats a member name or varies its case is refused, so no two readers
// (Barn, Barn 0.9, a mirror's tooling) can see different policies in the
// same signed bytes.
func TestDecodeCatalogRefusesDuplicateAndCaseVariantNames(t *testing.T) {
	b, err := Encode(elCatalog())
	if err != nil {
		t.Fatal(err)
	}
	variants, err := wiretest.Variants(b)
	if err != nil {
		t.Fatal(err)
	}
	variants["nested revision"] = []byte(strings.Replace(string(b), `"revision":`, `"REVISION":9,"revision":`, 1))
	for kind, bad := range variants {
		if _, err := DecodeCatalog(bad, "catalog.json"); exitcode.ClassOf(err) != exitcode.Integrity {
			t.Errorf("%s: %v, want integrity", kind, err)
		}
	}
}

// TestVariantAliasKeyNamesBarnsName: a variant keyed by an alias (aarch64)
// is refused, naming the key to write; catalog keys name files and are
// signed, so they are Barn's names only.
func TestVariantAliasKeyNamesBarnsName(t *testing.T) {
	c := elCatalog()
	v := c.Images["el"].Versions["9.3"]
	v.Variants["aarch64"] = v.Variants["amd64"]
	c.Images["el"].Versions["9.3"] = v
	var msg string
	for _, p := range c.Validate() {
		if p.Field == "images.el.versions.9.3.variants.aarch64" {
			msg = p.Message
		}
	}
	if !strings.Contains(msg, "write arm64") {
		t.Fatalf("problem %q; want one naming arm64", msg)
	}
}
