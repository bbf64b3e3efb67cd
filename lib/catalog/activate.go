package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"strconv"
	"strings"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/safefile"
)

// ActivateOptions tune Activate.
type ActivateOptions struct {
	AllowDowngrade bool // accept a revision below the high-water mark (recorded)
	// ExactLocation is where the bytes came from; for an unsigned catalog it
	// must be the repository's own catalog.json.
	ExactLocation string
}

// Activation is Activate's result.
type Activation struct {
	Record   *Record  `json:"record"`
	Catalog  *Catalog `json:"-"`
	Warnings []string `json:"warnings"`
}

// Activate verifies catalog bytes (and their detached signature, nil when
// absent) for repository src and makes them its active catalog. Every
// refusal is an integrity error (7):
//   - malformed or oversized catalog or signature;
//   - "unsigned_catalog": no signature where src always needs one (the
//     official repository, plain HTTP), or an unsigned file that is not the
//     repository's own catalog.json;
//   - "signature_required": no signature for an explicit repository that
//     was once accepted under a trusted signature (signer continuity; lifted
//     only by AllowUnsigned);
//   - "unknown_signer", "bad_signature", "signature_comment_mismatch": see
//     VerifySignature. The official repository accepts only its compiled
//     keys; others accept those and the keys in trust/. A signature by an
//     unknown key is never taken for "unsigned";
//   - "catalog_equivocation": an accepted revision (for the official
//     repository this includes the embedded one) with different bytes;
//   - "catalog_rollback": a revision below the high-water mark without
//     AllowDowngrade.
func (s *Store) Activate(src Source, data, sig []byte, o ActivateOptions) (*Activation, error) {
	c, err := DecodeCatalog(data, o.ExactLocation)
	if err != nil {
		return nil, err
	}
	reg, rec, err := s.recordOf(src)
	if err != nil {
		return nil, err
	}
	act := &Activation{Catalog: c, Warnings: []string{}}
	keyID, err := s.checkSigner(src, rec, c, data, sig, o.ExactLocation, act)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	rev := strconv.FormatUint(c.Revision, 10)
	if prev, ok := rec.Accepted[rev]; ok && prev != digest {
		return nil, exitcode.New(exitcode.Integrity, "%s: revision %d was accepted before with digest %s, now it has digest %s: the repository equivocates",
			o.ExactLocation, c.Revision, prev, digest).WithReason("catalog_equivocation")
	}
	downgrade := c.Revision < rec.HighestRevision
	if downgrade && !o.AllowDowngrade {
		return nil, exitcode.New(exitcode.Integrity, "%s: revision %d is below the accepted high-water mark %d for %s (a rollback)",
			o.ExactLocation, c.Revision, rec.HighestRevision, src.Root).WithReason("catalog_rollback").
			WithNext("barn-repo sync " + o.ExactLocation + " --repo " + src.Root + " --allow-downgrade   # only if you mean to go back")
	}
	name := fmt.Sprintf("v%d-%s.json", c.Revision, digest)
	if err := mkdirs(s.manifests(), s.versions()); err != nil {
		return nil, err
	}
	if err := safefile.Write(filepath.Join(s.versions(), name), data, 0o600); err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "storing catalog")
	}
	if keyID != "" {
		if err := safefile.Write(filepath.Join(s.versions(), name+"."+strings.ToLower(keyID)+".minisig"), sig, 0o600); err != nil {
			return nil, exitcode.Wrap(exitcode.Runtime, err, "storing signature")
		}
		if rec.SignedBy != "" && rec.SignedBy != keyID {
			act.Warnings = append(act.Warnings, fmt.Sprintf("%s was signed by key %s before; this catalog is signed by %s (also trusted)", src.Root, rec.SignedBy, keyID))
		}
		rec.SignatureRequired, rec.SignedBy = true, keyID
	}
	rec.Active, rec.ActiveRevision, rec.ActiveDigest, rec.KeyID = name, c.Revision, digest, keyID
	rec.AcceptedAt, rec.Downgrade = s.now(), downgrade
	rec.Accepted[rev] = digest
	if c.Revision > rec.HighestRevision {
		rec.HighestRevision = c.Revision
	}
	reg.Repositories[src.Key] = rec
	if err := s.writeRegistry(reg); err != nil {
		return nil, err
	}
	act.Record = rec
	return act, nil
}

// checkSigner decides whether the signature (or its absence) is acceptable
// for src and returns the signer's key ID ("" for an accepted unsigned
// catalog).
func (s *Store) checkSigner(src Source, rec *Record, c *Catalog, data, sig []byte, loc string, act *Activation) (string, error) {
	switch {
	case sig == nil && src.RequiresSignature():
		return "", exitcode.New(exitcode.Integrity, "%s: %s requires a catalog signed by a trusted key and %s has none", loc, src, SignatureFile).
			WithReason("unsigned_catalog")
	case sig == nil && rec.SignatureRequired:
		return "", exitcode.New(exitcode.Integrity, "%s: %s was accepted under a trusted signature (key %s) and this catalog is unsigned: refused, since anyone able to write to the repository could have put it there",
			loc, src, rec.SignedBy).WithReason("signature_required").
			WithNext("barn-repo trust allow-unsigned --repo " + src.Root + "   # only if the repository really stopped signing")
	case sig == nil:
		if loc != src.CatalogLocation() {
			return "", exitcode.New(exitcode.Integrity, "an unsigned catalog is accepted only from the repository's own %s, not %s", src.CatalogLocation(), loc).
				WithReason("unsigned_catalog")
		}
		act.Warnings = append(act.Warnings, fmt.Sprintf("catalog revision %d from %s is unsigned; selecting this repository is the trust decision", c.Revision, src.Root))
		return "", nil
	}
	keys, err := s.keysFor(src)
	if err != nil {
		return "", err
	}
	id, err := VerifySignature(keys, data, sig, c.Revision, loc+".minisig")
	var ee *exitcode.Error
	if err != nil && src.Official && errors.As(err, &ee) && ee.Reason == "unknown_signer" {
		c := *ee
		c.Message += "; the official repository is signed only by the keys compiled into Barn (keys added with barn-repo trust add do not count for it)"
		c.Next = ""
		return "", &c
	}
	return id, err
}

// recordOf reads the registry and returns it with a copy of src's record.
func (s *Store) recordOf(src Source) (*Registry, *Record, error) {
	reg, err := s.Registry()
	if err != nil {
		return nil, nil, err
	}
	rec, err := s.record(reg, src)
	return reg, rec, err
}

// record returns a copy of src's record (a new one when there is none).
// For the official repository the embedded catalog counts as accepted: its
// revision raises the high-water mark, its digest is the only one allowed at
// its revision, and it is active while nothing else is.
func (s *Store) record(reg *Registry, src Source) (*Record, error) {
	rec := &Record{Source: src.Root}
	if old := reg.Repositories[src.Key]; old != nil {
		cp := *old
		rec = &cp
	}
	rec.Accepted = maps.Clone(rec.Accepted)
	if rec.Accepted == nil {
		rec.Accepted = map[string]string{}
	}
	if !src.Official {
		rec.Source = src.Root
		return rec, nil
	}
	o := OfficialRepository()
	rec.Source, rec.SignatureRequired = o.Root, true
	emb, digest, err := o.Embedded()
	if err != nil {
		return nil, err
	}
	rev := strconv.FormatUint(emb.Revision, 10)
	if prev, ok := rec.Accepted[rev]; ok && prev != digest {
		return nil, exitcode.New(exitcode.Integrity, "the official repository's revision %d was accepted with digest %s, but the catalog embedded in this binary has digest %s at that revision: one of them equivocates",
			emb.Revision, prev, digest).WithReason("catalog_equivocation")
	}
	rec.Accepted[rev] = digest
	rec.HighestRevision = max(rec.HighestRevision, emb.Revision)
	if rec.Active == "" {
		rec.useEmbedded(emb.Revision, digest)
	}
	return rec, nil
}

func (r *Record) useEmbedded(revision uint64, digest string) {
	r.Active, r.ActiveRevision, r.ActiveDigest, r.KeyID = EmbeddedActive, revision, digest, ""
	r.Downgrade = revision < r.HighestRevision
}

// Reset returns src to its built-in catalog and keeps the high-water mark,
// the accepted digests and the signer record: for the official repository
// the catalog embedded in the binary (a recorded downgrade when a newer
// revision was accepted before), for any other repository none.
func (s *Store) Reset(src Source) (*Record, error) {
	reg, rec, err := s.recordOf(src)
	if err != nil {
		return nil, err
	}
	if src.Official {
		emb, digest, err := OfficialRepository().Embedded()
		if err != nil {
			return nil, err
		}
		rec.useEmbedded(emb.Revision, digest)
	} else {
		rec.Active, rec.ActiveRevision, rec.ActiveDigest, rec.KeyID, rec.Downgrade = "", 0, "", "", false
	}
	rec.AcceptedAt = s.now()
	reg.Repositories[src.Key] = rec
	return rec, s.writeRegistry(reg)
}

// AllowUnsigned lifts src's signature requirement (Record.SignatureRequired)
// so that its next catalog may be unsigned; the next catalog accepted under
// a trusted signature sets it again. It reports whether anything changed.
// The official repository, plain HTTP and a repository that is not
// explicitly selected always need a signature: usage error, reason
// "signature_always_required". Callers record the action in the event log.
func (s *Store) AllowUnsigned(src Source) (*Record, bool, error) {
	if src.RequiresSignature() {
		return nil, false, exitcode.New(exitcode.Usage, "%s always needs a trusted signature (the official repository, plain HTTP, or not chosen with --repo/BARN_REPO); there is nothing to allow", src).
			WithReason("signature_always_required")
	}
	reg, rec, err := s.recordOf(src)
	if err != nil {
		return nil, false, err
	}
	if !rec.SignatureRequired {
		return rec, false, nil
	}
	now := s.now()
	rec.SignatureRequired, rec.UnsignedAllowedAt = false, &now
	reg.Repositories[src.Key] = rec
	return rec, true, s.writeRegistry(reg)
}
