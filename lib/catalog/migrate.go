package catalog

import (
	"fmt"
	"maps"
)

// canonicalise re-keys records written by earlier Barn versions under a
// non-canonical spelling of their repository (a trailing dot, a zero-padded
// port, a full-width host, ...) to the key ParseSource gives today, so that
// the record still applies. When two records turn out to be the same
// repository they are merged into the stricter one (mergeRecords) and the
// merge is recorded in Record.MergedFrom. It returns one note per re-keyed
// or merged record, for the caller to show. A record whose source has no
// canonical form any more stays where it is: no source can reach it, and
// its accepted catalogs still count for the cache (AcceptedCatalogs).
func (reg *Registry) canonicalise() []string {
	notes := []string{}
	for _, key := range sortedKeys(reg.Repositories) {
		if key == OfficialSlot {
			continue
		}
		rec := reg.Repositories[key]
		src, err := ParseSource(rec.Source, true)
		if err != nil || src.Key == key {
			continue
		}
		delete(reg.Repositories, key)
		into := reg.Repositories[src.Key]
		if into == nil && !src.Official {
			notes = append(notes, fmt.Sprintf("the catalog record of %s now applies to its canonical spelling %s", rec.Source, src.Root))
			rec.Source = src.Root
			reg.Repositories[src.Key] = rec
			continue
		}
		if into == nil {
			into = &Record{Source: OfficialRepository().Root, SignatureRequired: true, Accepted: map[string]string{}}
		}
		reg.Repositories[src.Key] = mergeRecords(into, rec, src.Official)
		notes = append(notes, fmt.Sprintf("%s is another spelling of %s: their catalog records were merged, keeping the stricter (high-water mark %d, signature required: %v)",
			rec.Source, into.Source, reg.Repositories[src.Key].HighestRevision, reg.Repositories[src.Key].SignatureRequired))
	}
	return notes
}

// mergeRecords folds record b into record a (both the same repository) and
// returns the stricter result: the higher high-water mark, a signature
// required if either required one, every accepted revision (where both
// accepted one revision with different bytes, a's digest is kept: the
// repository equivocated, and either digest refuses the other's bytes
// again). The active catalog is the best one either record may keep under
// the merged rules: signed when a signature is now required, else the
// higher revision. For the official repository (official) the active
// catalog stays a's: only catalogs accepted under the official keys may be
// active there.
func mergeRecords(a, b *Record, official bool) *Record {
	out := *a
	out.Accepted = maps.Clone(a.Accepted)
	if out.Accepted == nil {
		out.Accepted = map[string]string{}
	}
	for rev, d := range b.Accepted {
		if _, ok := out.Accepted[rev]; !ok {
			out.Accepted[rev] = d
		}
	}
	out.HighestRevision = max(a.HighestRevision, b.HighestRevision)
	out.SignatureRequired = a.SignatureRequired || b.SignatureRequired
	if out.SignedBy == "" {
		out.SignedBy = b.SignedBy
	}
	if b.UnsignedAllowedAt != nil && (out.UnsignedAllowedAt == nil || b.UnsignedAllowedAt.After(*out.UnsignedAllowedAt)) {
		out.UnsignedAllowedAt = b.UnsignedAllowedAt
	}
	if !official && activeRank(b, out.SignatureRequired) > activeRank(a, out.SignatureRequired) {
		out.Active, out.ActiveRevision, out.ActiveDigest, out.KeyID, out.AcceptedAt = b.Active, b.ActiveRevision, b.ActiveDigest, b.KeyID, b.AcceptedAt
	}
	if !official && out.Active != "" {
		out.Downgrade = out.ActiveRevision < out.HighestRevision
	}
	out.MergedFrom = append(append(append([]string{}, a.MergedFrom...), b.Source), b.MergedFrom...)
	return &out
}

// activeRank orders records by how acceptable their active catalog is when
// signatureRequired: none < unsigned where a signature is required <
// acceptable, then by revision.
func activeRank(r *Record, signatureRequired bool) uint64 {
	switch {
	case r.Active == "":
		return 0
	case signatureRequired && r.KeyID == "":
		return 1
	}
	return 2 + min(r.ActiveRevision, ^uint64(0)-2)
}
