package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/safefile"
	"barn.dev/lib/wire"
)

// writeLegacyRecord stores data as the active, unsigned catalog of a
// record keyed by root as typed, as Barn did before canonical URLs (the
// file is written directly: reading it through Registry would already
// canonicalise it).
func writeLegacyRecord(t *testing.T, st *Store, root string, rev uint64, data []byte) {
	t.Helper()
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	name := fmt.Sprintf("v%d-%s.json", rev, digest)
	if err := safefile.Write(filepath.Join(st.versions(), name), data, 0o600); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(st.registryPath())
	if err != nil {
		t.Fatal(err)
	}
	var reg Registry
	if err := wire.DecodeStrict(raw, &reg); err != nil {
		t.Fatal(err)
	}
	reg.Repositories[slotKey(root)] = &Record{Source: root, HighestRevision: rev, Active: name, ActiveRevision: rev, ActiveDigest: digest,
		AcceptedAt: st.now(), Accepted: map[string]string{strconv.FormatUint(rev, 10): digest}}
	if err := st.writeRegistry(&reg); err != nil {
		t.Fatal(err)
	}
}

// Records an earlier Barn wrote under another spelling of a repository are
// found again: re-keyed to the canonical spelling, and where two records
// name one repository, merged into the stricter (highest mark, signature
// required, the signed active catalog), saying so.
func TestRegistryMergesRecordsOfOtherSpellings(t *testing.T) {
	testOfficial(t, 10)
	root := testRoot(t)
	st := &Store{Dir: root.ImagesDir()}
	key, public, id := testKey(t)
	if _, err := st.AddTrust(public); err != nil {
		t.Fatal(err)
	}
	// What the old code let happen: a signed record, then an unsigned
	// rollback accepted under another spelling of the same server.
	lab, _ := ParseSource("https://lab.example/repo", true)
	data, sig := signedRevision(t, key, 50, nil)
	if _, err := st.Activate(lab, data, sig, ActivateOptions{ExactLocation: lab.CatalogLocation()}); err != nil {
		t.Fatal(err)
	}
	for _, old := range []struct {
		root string
		rev  uint64
	}{{"https://lab.example:0443/repo", 3}, {"https://other.example./repo", 4}, {"https://official.test./barn", 12}} {
		data, _ := signedRevision(t, key, old.rev, nil)
		writeLegacyRecord(t, st, old.root, old.rev, data)
	}

	reg, err := st.Registry()
	if err != nil {
		t.Fatal(err)
	}
	if len(reg.Repositories) != 3 {
		t.Fatalf("records after canonicalising: %v", sortedKeys(reg.Repositories))
	}
	merged := reg.Repositories[lab.Key]
	if merged.HighestRevision != 50 || !merged.SignatureRequired || merged.SignedBy != id || merged.ActiveRevision != 50 || merged.KeyID != id ||
		merged.Downgrade || len(merged.MergedFrom) != 1 || merged.MergedFrom[0] != "https://lab.example:0443/repo" || merged.Accepted["3"] == "" {
		t.Fatalf("merged lab record: %+v", merged)
	}
	other, _ := ParseSource("https://other.example/repo", true)
	if r := reg.Repositories[other.Key]; r == nil || r.Source != "https://other.example/repo" || r.ActiveRevision != 4 {
		t.Fatalf("re-keyed record: %+v", r)
	}
	if r := reg.Repositories[OfficialSlot]; r == nil || r.HighestRevision != 12 || !r.SignatureRequired || r.Active != "" || r.MergedFrom[0] != "https://official.test./barn" {
		t.Fatalf("a record of an official spelling joins the official record without its unsigned catalog: %+v", r)
	}
	notes := strings.Join(reg.Notes, "\n")
	for _, want := range []string{"https://lab.example:0443/repo is another spelling of https://lab.example/repo", "high-water mark 50, signature required: true",
		"https://other.example./repo now applies to its canonical spelling https://other.example/repo", "https://official.test./barn is another spelling"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes %q lack %q", notes, want)
		}
	}

	// The merged record is enforced, under every spelling.
	for _, loc := range []string{"https://lab.example:0443/repo", "https://lab.example/repo"} {
		src, _ := ParseSource(loc, true)
		data, _ := signedRevision(t, key, 51, nil)
		if _, err := st.Activate(src, data, nil, ActivateOptions{ExactLocation: src.CatalogLocation()}); exitcode.As(err).Reason != "signature_required" {
			t.Fatalf("unsigned after the merge via %s: %v", loc, err)
		}
		data, sig := signedRevision(t, key, 5, nil)
		if _, err := st.Activate(src, data, sig, ActivateOptions{ExactLocation: src.CatalogLocation()}); exitcode.As(err).Reason != "catalog_rollback" {
			t.Fatalf("signed rollback after the merge via %s: %v", loc, err)
		}
	}
	official, _ := Select("", false, "")
	if c, rec, err := st.Active(official); err != nil || c.Revision != 10 || rec.HighestRevision != 12 {
		t.Fatalf("official after the merge: %v %+v %v", c, rec, err)
	}
	// The first write persists the canonical keys and says what it merged.
	data, sig = signedRevision(t, key, 60, nil)
	act, err := st.Activate(lab, data, sig, ActivateOptions{ExactLocation: lab.CatalogLocation()})
	if err != nil || !strings.Contains(strings.Join(act.Warnings, "\n"), "another spelling") {
		t.Fatalf("activation after the merge: %+v %v", act, err)
	}
	reg, err = st.Registry()
	if err != nil || len(reg.Notes) != 0 || len(reg.Repositories) != 3 || reg.Repositories[lab.Key].MergedFrom[0] != "https://lab.example:0443/repo" {
		t.Fatalf("after the write: %+v %v", reg, err)
	}
}
