package catalog

import (
	"encoding/base64"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
)

// impostorKey returns a fresh public key (text) that carries key ID id:
// minisign key IDs are chosen by the key's maker, not derived from it.
func impostorKey(t *testing.T, id uint64) []byte {
	t.Helper()
	_, public, _ := testKey(t)
	lines := strings.Split(strings.TrimSpace(string(public)), "\n")
	raw, err := base64.StdEncoding.DecodeString(lines[len(lines)-1])
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint64(raw[2:10], id)
	return []byte("untrusted comment: impostor\n" + base64.StdEncoding.EncodeToString(raw) + "\n")
}

// trust add never takes an official key ID: not the official key itself
// (compiled in, it already counts for every repository, and a trust/ copy
// would read as a second, removable pin of it), and never another key
// under that ID (which would show and pin as the official signer). A
// trust/ file planted under an official ID is refused on every read.
func TestTrustAddRefusesOfficialKeyIDs(t *testing.T) {
	testOfficial(t, 1)
	st := &Store{Dir: testRoot(t).ImagesDir()}
	official := OfficialRepository().Keys[0]
	genuine, _ := official.MarshalText()
	id := KeyID(official.ID())

	_, err := st.AddTrust(genuine)
	if e := exitcode.As(err); err == nil || e.Class != exitcode.Usage || e.Reason != "official_key" || !strings.Contains(e.Message, id) || e.Next != "barn-repo trust list" {
		t.Fatalf("trust add of the official key: %v", err)
	}
	impostor := impostorKey(t, official.ID())
	if k, err := ParsePublicKey(impostor); err != nil || k.ID() != official.ID() || k.Equal(official) {
		t.Fatalf("impostor key: %v", err)
	}
	_, err = st.AddTrust(impostor)
	if e := exitcode.As(err); err == nil || e.Class != exitcode.Conflict || e.Reason != "official_key_id" || !strings.Contains(e.Message, id) || !strings.Contains(e.Next, "keygen") {
		t.Fatalf("trust add of another key under the official ID: %v", err)
	}
	if _, err := os.Stat(filepath.Join(st.trustDir(), id+".pub")); !os.IsNotExist(err) {
		t.Fatalf("a refused key was stored: %v", err)
	}
	if keys, err := st.TrustedKeys(); err != nil || len(keys) != 0 {
		t.Fatalf("trusted keys after refusals: %v %v", keys, err)
	}

	// planted by hand (or by an earlier Barn): refused, naming the file
	if err := mkdirs(st.trustDir()); err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(st.trustDir(), id+".pub")
	if err := os.WriteFile(planted, impostor, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = st.TrustedKeys()
	if e := exitcode.As(err); err == nil || e.Class != exitcode.Integrity || e.Reason != "damaged_trust" || !strings.Contains(e.Message, planted) || e.Next != "rm "+planted {
		t.Fatalf("TrustedKeys with a planted official ID: %v", err)
	}
	// a copy of the genuine official key is harmless and still listed
	if err := os.WriteFile(planted, genuine, 0o600); err != nil {
		t.Fatal(err)
	}
	if keys, err := st.TrustedKeys(); err != nil || len(keys) != 1 {
		t.Fatalf("TrustedKeys with a copy of the official key: %v %v", keys, err)
	}
}
