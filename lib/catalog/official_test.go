package catalog

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"aead.dev/minisign"

	"barn.dev/lib/exitcode"
)

// The embedded catalog is Barn 0.9's, byte for byte, and Barn writes it
// back to the same bytes: decoding and encoding are 0.9's layout.
func TestEmbeddedCatalogIsBarn09s(t *testing.T) {
	o := OfficialRepository()
	c, digest, err := o.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	if digest != "1802442f534994e39c59953c23fff6fa9638dfce097cbc2eea1b745d9952d6f6" {
		t.Fatalf("embedded catalog digest %s: not Barn 0.9's published default catalog (see official/PROVENANCE.md)", digest)
	}
	again, err := Encode(c)
	if err != nil || string(again) != string(o.Catalog) {
		t.Fatalf("re-encoding the embedded catalog does not give its bytes back (%v)", err)
	}
	if ps := c.Validate(); len(ps) != 0 {
		t.Fatalf("embedded catalog: %v", ps)
	}
	if c.Schema != 3 || c.Revision != 2026092901 || c.Defaults != (Defaults{Image: "u24", Channel: "stable", Arch: "native", Boot: "uefi"}) {
		t.Fatalf("embedded header: schema %d revision %d defaults %+v", c.Schema, c.Revision, c.Defaults)
	}
	if got := strings.Join(sortedKeys(c.Images), " "); got != "d12 d13 el10 el7 el8 el9 u22 u24 u26" {
		t.Fatalf("families %s", got)
	}
	ids := c.Identities()
	if len(ids) != 45 { // 0.9.0's docs say 41; revision 2026092901 has 45
		t.Fatalf("%d artifacts, want 45", len(ids))
	}
	for _, id := range ids {
		wantBoot := "uefi"
		if id.Image == "el7" {
			wantBoot = "bios"
		}
		if id.Boot != wantBoot || id.Status == "" || id.SourceUser == "" {
			t.Errorf("%s@%s %s: boot %q status %q source_user %q", id.Image, id.Version, id.Arch, id.Boot, id.Status, id.SourceUser)
		}
	}
	if got := []string{KeyID(o.Keys[0].ID()), KeyID(o.Keys[1].ID())}; got[0] != "4686B39A40F9B562" || got[1] != "B3170D11FD89AD9A" {
		t.Fatalf("official keys %v", got)
	}
	if o.Root != "https://repo.pigsty.io/barn" || o.Mirror != "https://repo.pigsty.cc/barn" {
		t.Fatalf("official roots %s %s", o.Root, o.Mirror)
	}
}

// Issue 14 case 1: Barn 0.9's catalog.json in a directory selected with
// --repo is accepted (it was refused with 90 problems: boot and status are
// inherited in 0.9, source_user optional).
func TestBarn09CatalogInAnExplicitDirectory(t *testing.T) {
	root := testRoot(t)
	st := &Store{Dir: root.ImagesDir()}
	src, _ := ParseSource(t.TempDir(), true)
	act, err := st.Activate(src, OfficialRepository().Catalog, nil, ActivateOptions{ExactLocation: src.CatalogLocation()})
	if err != nil || act.Record.ActiveRevision != 2026092901 {
		t.Fatalf("0.9's catalog from a directory: %+v %v", act, err)
	}
	if id, err := act.Catalog.Resolve("", "amd64"); err != nil || id.Image != "u24" || id.Boot != "uefi" || id.Status != "supported" {
		t.Fatalf("default image: %+v %v", id, err)
	}
}

// testOfficial substitutes an official repository whose embedded catalog is
// elCatalog at revision rev, signed by a fresh key, and returns that key.
func testOfficial(t *testing.T, rev uint64) minisign.PrivateKey {
	t.Helper()
	key, public, _ := testKey(t)
	pub, err := ParsePublicKey(public)
	if err != nil {
		t.Fatal(err)
	}
	c := elCatalog()
	c.Revision = rev
	data, _ := Encode(c)
	t.Cleanup(SubstituteOfficialForTest(&Official{Root: "https://official.test/barn", Mirror: "https://mirror.test/barn", Catalog: data, Keys: []minisign.PublicKey{pub}}))
	return key
}

func signedRevision(t *testing.T, key minisign.PrivateKey, rev uint64, edit func(*Catalog)) ([]byte, []byte) {
	t.Helper()
	c := elCatalog()
	c.Revision = rev
	if edit != nil {
		edit(c)
	}
	data, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	return data, Sign(key, data, rev)
}

// The official repository starts from the embedded catalog, which counts
// as accepted: a lower revision is a rollback and other bytes at its
// revision are equivocation, even before anything was ever downloaded.
func TestOfficialBaselineAntiRollback(t *testing.T) {
	officialKey := testOfficial(t, 10)
	root := testRoot(t)
	st := &Store{Dir: root.ImagesDir()}
	src, _ := Select("", false, "")
	loc := src.CatalogLocation()

	c, rec, err := st.Active(src)
	if err != nil || c.Revision != 10 || rec.Active != EmbeddedActive || rec.HighestRevision != 10 {
		t.Fatalf("out of the box: %+v %+v %v", c, rec, err)
	}
	if cats, err := st.ActiveCatalogs(); err != nil || cats[src.Root] == nil || cats[src.Root].Revision != 10 {
		t.Fatalf("ActiveCatalogs must include the embedded catalog: %v %v", cats, err)
	}

	data, sig := signedRevision(t, officialKey, 9, nil)
	if _, err := st.Activate(src, data, sig, ActivateOptions{ExactLocation: loc}); exitcode.As(err).Reason != "catalog_rollback" {
		t.Fatalf("revision below the embedded one: %v", err)
	}
	data, sig = signedRevision(t, officialKey, 10, func(c *Catalog) { c.Defaults.Channel = "old" })
	if _, err := st.Activate(src, data, sig, ActivateOptions{ExactLocation: loc}); exitcode.As(err).Reason != "catalog_equivocation" {
		t.Fatalf("other bytes at the embedded revision: %v", err)
	}
	data, _ = signedRevision(t, officialKey, 11, nil)
	if _, err := st.Activate(src, data, nil, ActivateOptions{ExactLocation: loc}); exitcode.As(err).Reason != "unsigned_catalog" {
		t.Fatalf("unsigned official catalog: %v", err)
	}
	// A key the user trusts for their own repositories does not count for
	// the official one.
	labKey, labPublic, _ := testKey(t)
	if _, err := st.AddTrust(labPublic); err != nil {
		t.Fatal(err)
	}
	data, sig = signedRevision(t, labKey, 11, nil)
	if _, err := st.Activate(src, data, sig, ActivateOptions{ExactLocation: loc}); exitcode.As(err).Reason != "unknown_signer" {
		t.Fatalf("official catalog signed by a lab key: %v", err)
	}
	data, sig = signedRevision(t, officialKey, 11, nil)
	act, err := st.Activate(src, data, sig, ActivateOptions{ExactLocation: loc})
	if err != nil || act.Record.ActiveRevision != 11 || act.Record.HighestRevision != 11 || act.Record.Accepted["10"] == "" {
		t.Fatalf("newer signed official catalog: %+v %v", act, err)
	}
	// The mirror shares the record: the same revision is already accepted.
	_, mirror := OfficialRepository().Sources()
	if c, rec, err := st.Active(mirror); err != nil || c.Revision != 11 || rec.ActiveRevision != 11 {
		t.Fatalf("mirror view: %v %+v %v", c, rec, err)
	}

	// reset returns to the embedded catalog and keeps the mark.
	rec, err = st.Reset(src)
	if err != nil || rec.Active != EmbeddedActive || rec.ActiveRevision != 10 || rec.HighestRevision != 11 || !rec.Downgrade {
		t.Fatalf("reset: %+v %v", rec, err)
	}
	if c, _, _ := st.Active(src); c.Revision != 10 {
		t.Fatalf("after reset the embedded catalog is active, got revision %d", c.Revision)
	}
	data, sig = signedRevision(t, officialKey, 10, nil)
	if _, err := st.Activate(src, data, sig, ActivateOptions{ExactLocation: loc}); exitcode.As(err).Reason != "catalog_rollback" {
		t.Fatalf("after reset the mark still holds: %v", err)
	}
}

// A binary that embeds a newer revision than the one activated before
// uses its embedded catalog and raises the mark.
func TestNewerBinaryEmbedsNewerCatalog(t *testing.T) {
	officialKey := testOfficial(t, 10)
	root := testRoot(t)
	st := &Store{Dir: root.ImagesDir()}
	src, _ := Select("", false, "")
	data, sig := signedRevision(t, officialKey, 11, nil)
	if _, err := st.Activate(src, data, sig, ActivateOptions{ExactLocation: src.CatalogLocation()}); err != nil {
		t.Fatal(err)
	}
	o := *OfficialRepository()
	newer := elCatalog()
	newer.Revision = 12
	o.Catalog, _ = Encode(newer)
	t.Cleanup(SubstituteOfficialForTest(&o))
	c, rec, err := st.Active(src)
	if err != nil || c.Revision != 12 || rec.Active != EmbeddedActive || rec.HighestRevision != 12 {
		t.Fatalf("newer binary: %v %+v %v", c, rec, err)
	}
	if _, err := st.Activate(src, data, sig, ActivateOptions{ExactLocation: src.CatalogLocation()}); exitcode.As(err).Reason != "catalog_rollback" {
		t.Fatalf("re-activating the older download under a newer binary: %v", err)
	}
}

// Signer continuity, in the store: an explicit repository accepted under a
// trusted signature refuses unsigned and unknown-signer catalogs until the
// requirement is lifted, which one trusted signature sets again.
func TestSignerContinuity(t *testing.T) {
	root := testRoot(t)
	st := &Store{Dir: root.ImagesDir()}
	key, public, id := testKey(t)
	if _, err := st.AddTrust(public); err != nil {
		t.Fatal(err)
	}
	attacker, _, _ := testKey(t)
	src, _ := ParseSource(t.TempDir(), true)
	loc := src.CatalogLocation()
	activate := func(rev uint64, k *minisign.PrivateKey) error {
		data, sig := signedRevision(t, key, rev, nil)
		switch {
		case k == nil:
			sig = nil
		case k != &key:
			sig = Sign(*k, data, rev)
		}
		_, err := st.Activate(src, data, sig, ActivateOptions{ExactLocation: loc})
		return err
	}
	if err := activate(1, nil); err != nil {
		t.Fatalf("a first unsigned catalog of an explicit directory: %v", err)
	}
	if err := activate(2, &attacker); exitcode.As(err).Reason != "unknown_signer" {
		t.Fatalf("an unknown signer is never taken for unsigned: %v", err)
	}
	if err := activate(2, &key); err != nil {
		t.Fatal(err)
	}
	if err := activate(3, nil); exitcode.As(err).Reason != "signature_required" || !strings.Contains(exitcode.As(err).Next, "allow-unsigned") {
		t.Fatalf("unsigned after signed: %v", err)
	}
	if err := activate(3, &attacker); exitcode.As(err).Reason != "unknown_signer" {
		t.Fatalf("unknown signer after signed: %v", err)
	}
	if _, rec, _ := st.Active(src); rec.ActiveRevision != 2 || rec.KeyID != id {
		t.Fatalf("refusals changed the record: %+v", rec)
	}
	if _, err := st.Reset(src); err != nil {
		t.Fatal(err)
	}
	if err := activate(3, nil); exitcode.As(err).Reason != "signature_required" {
		t.Fatalf("reset must not lift the requirement: %v", err)
	}
	rec, changed, err := st.AllowUnsigned(src)
	if err != nil || !changed || rec.SignatureRequired || rec.UnsignedAllowedAt == nil || rec.SignedBy != id {
		t.Fatalf("allow-unsigned: %+v %v %v", rec, changed, err)
	}
	if err := activate(3, nil); err != nil {
		t.Fatalf("unsigned after allow-unsigned: %v", err)
	}
	if err := activate(4, &key); err != nil {
		t.Fatal(err)
	}
	if err := activate(5, nil); exitcode.As(err).Reason != "signature_required" {
		t.Fatalf("a new trusted signature must set the requirement again: %v", err)
	}
	for _, loc := range []string{"http://repo.test/barn", "https://repo.pigsty.io/barn"} {
		s, _ := ParseSource(loc, true)
		if _, _, err := st.AllowUnsigned(s); exitcode.As(err).Reason != "signature_always_required" {
			t.Errorf("allow-unsigned for %s: %v", loc, err)
		}
	}
}

// The test seam cannot be used by a shipped program: an ordinary binary
// that calls SubstituteOfficialForTest panics before anything is replaced.
func TestSubstituteRefusedOutsideTests(t *testing.T) {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	out, err := exec.Command(goTool, "run", "./testdata/substitute").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "SubstituteOfficialForTest called outside a test binary") {
		t.Fatalf("a non-test program could substitute the official repository: %v\n%s", err, out)
	}
}
