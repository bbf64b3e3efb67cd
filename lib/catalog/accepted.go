package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"barn.dev/lib/exitcode"
)

// AcceptedCatalogs returns every catalog this store ever accepted and
// still holds — each revision a repository's record lists as accepted,
// read from manifests/versions and re-hashed against the recorded digest —
// plus the official repository's embedded catalog. These are Barn's record
// of every artifact it may have pulled into the cache: the image cache
// deletes a file only when one of them names it (imagecache.Prune). A
// stored catalog whose bytes differ from its record is an integrity error;
// an accepted revision whose file is gone is skipped (its artifacts are
// then simply not proven).
func (s *Store) AcceptedCatalogs() ([]*Catalog, error) {
	emb, _, err := OfficialRepository().Embedded()
	if err != nil {
		return nil, err
	}
	out := []*Catalog{emb}
	reg, err := s.Registry()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, key := range sortedKeys(reg.Repositories) {
		rec := reg.Repositories[key]
		revs := make([]string, 0, len(rec.Accepted))
		for rev := range rec.Accepted {
			revs = append(revs, rev)
		}
		sort.Strings(revs)
		for _, rev := range revs {
			digest := rec.Accepted[rev]
			name := fmt.Sprintf("v%s-%s.json", rev, digest)
			if seen[name] {
				continue
			}
			seen[name] = true
			p := filepath.Join(s.versions(), name)
			data, err := os.ReadFile(p)
			if os.IsNotExist(err) {
				continue
			} else if err != nil {
				return nil, exitcode.Wrap(exitcode.Runtime, err, "reading %s", p)
			}
			sum := sha256.Sum256(data)
			if hex.EncodeToString(sum[:]) != digest {
				return nil, exitcode.New(exitcode.Integrity, "%s does not match its recorded digest %s", p, digest).WithReason("damaged_registry")
			}
			c, err := DecodeCatalog(data, p)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
	}
	return out, nil
}
