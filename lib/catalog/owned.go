package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"aead.dev/minisign"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/safefile"
)

// OwnedFiles returns the files of the store (absolute paths) that Barn's
// records prove it wrote, by their bytes, not their names:
//   - manifests/state.json, when it reads as Barn's registry (Registry);
//   - manifests/versions/v<rev>-<sha256>.json for every revision a record
//     lists as accepted, whose bytes hash to that digest;
//   - beside such a catalog, v<rev>-<sha256>.json.<keyid>.minisig when it
//     parses as a minisign signature naming that key ID whose trusted
//     comment names exactly that revision and digest (TrustedComment), as
//     Activate stores it (the signature itself is not re-verified here:
//     Activate verified it before storing, inside the store's own 0700
//     directory);
//   - trust/<KEYID>.pub holding exactly the text AddTrust writes for the
//     key with that ID.
//
// Anything else in the store is not proven (the caller keeps it). A
// damaged registry, or an accepted catalog whose bytes differ from its
// record, is the integrity error Registry or AcceptedCatalogs returns.
func (s *Store) OwnedFiles() (map[string]bool, error) {
	owned := map[string]bool{}
	reg, err := s.Registry()
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(s.registryPath()); err == nil {
		owned[s.registryPath()] = true
	}
	catalogs := map[string][]byte{} // versions/ file name → bytes
	for _, key := range sortedKeys(reg.Repositories) {
		for rev, digest := range reg.Repositories[key].Accepted {
			name := fmt.Sprintf("v%s-%s.json", rev, digest)
			p := filepath.Join(s.versions(), name)
			data, err := readRegular(p)
			if os.IsNotExist(err) {
				continue
			} else if err != nil {
				return nil, exitcode.Wrap(exitcode.Runtime, err, "reading %s", p)
			}
			if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != digest {
				return nil, exitcode.New(exitcode.Integrity, "%s does not match its recorded digest %s", p, digest).WithReason("damaged_registry")
			}
			owned[p] = true
			catalogs[name] = data
		}
	}
	if entries, err := os.ReadDir(s.versions()); err == nil {
		for _, e := range entries {
			catName, keyID, ok := signatureName(e.Name())
			data, accepted := catalogs[catName]
			if !ok || !accepted || !e.Type().IsRegular() {
				continue
			}
			p := filepath.Join(s.versions(), e.Name())
			if sig, err := readRegular(p); err == nil && signs(sig, keyID, data, catName) {
				owned[p] = true
			}
		}
	}
	if entries, err := os.ReadDir(s.trustDir()); err == nil {
		for _, e := range entries {
			p := filepath.Join(s.trustDir(), e.Name())
			if !e.Type().IsRegular() {
				continue
			}
			text, err := readRegular(p)
			if err != nil {
				continue
			}
			k, err := ParsePublicKey(text)
			if err != nil {
				continue
			}
			canon, _ := k.MarshalText()
			if e.Name() == KeyID(k.ID())+".pub" && string(text) == string(canon)+"\n" {
				owned[p] = true
			}
		}
	}
	return owned, nil
}

// signatureName splits "v<rev>-<sha>.json.<keyid>.minisig".
func signatureName(name string) (catalog, keyID string, ok bool) {
	rest, ok := strings.CutSuffix(name, ".minisig")
	if !ok {
		return "", "", false
	}
	i := strings.LastIndex(rest, ".")
	if i < 0 || !strings.HasSuffix(rest[:i], ".json") {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}

// signs reports whether sig is a minisign signature by key keyID (lower
// case, as Activate names it) whose trusted comment names the catalog
// data stored as catName.
func signs(sig []byte, keyID string, data []byte, catName string) bool {
	var s minisign.Signature
	if len(sig) > MaxSignatureBytes || s.UnmarshalText(sig) != nil || strings.ToLower(KeyID(s.KeyID)) != keyID {
		return false
	}
	rev, err := strconv.ParseUint(strings.TrimPrefix(strings.SplitN(catName, "-", 2)[0], "v"), 10, 64)
	return err == nil && s.TrustedComment == TrustedComment(rev, data)
}

// readRegular reads a regular file of at most MaxCatalogBytes without
// following a symlink.
func readRegular(p string) ([]byte, error) {
	data, _, err := safefile.ReadFile(p, MaxCatalogBytes, nil)
	return data, err
}
