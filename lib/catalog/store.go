package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"aead.dev/minisign"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/imageref"
	"barn.dev/lib/safefile"
	"barn.dev/lib/state"
	"barn.dev/lib/wire"
)

// RegistrySchema is the schema of <images>/manifests/state.json.
const RegistrySchema = "barn.catalog.registry/v1"

// Store is the catalog part of the image directory:
//
//	<images>/manifests/state.json                       Registry (records per repository)
//	<images>/manifests/versions/v<rev>-<sha>.json       accepted catalogs, byte for byte
//	<images>/manifests/versions/v<rev>-<sha>.json.<keyid>.minisig
//	<images>/trust/<KEYID>.pub                           keys trusted to sign catalogs
//
// Writers must hold the images lock (state.Root.LockImages).
type Store struct {
	Dir string           // <BARN_HOME>/images
	Now func() time.Time // clock for accepted_at; time.Now when nil
}

// Registry is manifests/state.json.
type Registry struct {
	Schema       string             `json:"schema"`
	DefaultRepo  string             `json:"default_repo"` // configured default repository, "" when none
	Repositories map[string]*Record `json:"repositories"` // by Source.Key
}

// Record is one repository's anti-rollback and activation record.
type Record struct {
	Source          string            `json:"source"`           // repository root
	HighestRevision uint64            `json:"highest_revision"` // high-water mark; never lowered, not even by reset
	Active          string            `json:"active"`           // "" (built-in: none) or versions/ file name
	ActiveRevision  uint64            `json:"active_revision"`
	ActiveDigest    string            `json:"active_digest"` // sha256 of the active catalog bytes
	KeyID           string            `json:"key_id"`        // signer of the active catalog, "" when unsigned
	AcceptedAt      time.Time         `json:"accepted_at"`
	Downgrade       bool              `json:"downgrade"` // the active catalog is below the mark (--allow-downgrade)
	Accepted        map[string]string `json:"accepted"`  // revision → digest of every catalog ever accepted
}

func (s *Store) manifests() string { return filepath.Join(s.Dir, "manifests") }
func (s *Store) versions() string  { return filepath.Join(s.manifests(), "versions") }
func (s *Store) trustDir() string  { return filepath.Join(s.Dir, "trust") }
func (s *Store) registryPath() string {
	return filepath.Join(s.manifests(), "state.json")
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

// Registry reads manifests/state.json; a missing file is an empty registry.
// A damaged one is an integrity error naming it.
func (s *Store) Registry() (*Registry, error) {
	reg := &Registry{Schema: RegistrySchema, Repositories: map[string]*Record{}}
	p := s.registryPath()
	data, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		return reg, nil
	}
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "reading %s", p)
	}
	if err := wire.DecodeStrict(data, reg); err != nil || reg.Schema != RegistrySchema {
		if err == nil {
			err = fmt.Errorf("schema %q, want %q", reg.Schema, RegistrySchema)
		}
		return nil, exitcode.Wrap(exitcode.Integrity, err, "%s is damaged", p).WithReason("damaged_registry")
	}
	if reg.Repositories == nil {
		reg.Repositories = map[string]*Record{}
	}
	return reg, nil
}

func (s *Store) writeRegistry(reg *Registry) error {
	if err := mkdirs(s.versions()); err != nil {
		return err
	}
	b, err := wire.MarshalIndent(reg)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "encoding registry")
	}
	if err := safefile.Write(s.registryPath(), append(b, '\n'), 0o600); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "writing %s", s.registryPath())
	}
	return nil
}

func mkdirs(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "creating %s", dir)
	}
	return nil
}

// SetDefault records (or clears, with "") the configured default repository.
func (s *Store) SetDefault(root string) error {
	reg, err := s.Registry()
	if err != nil {
		return err
	}
	reg.DefaultRepo = root
	return s.writeRegistry(reg)
}

// TrustedKey is one key in trust/.
type TrustedKey struct {
	KeyID string             `json:"key_id"`
	Path  string             `json:"path"`
	Key   minisign.PublicKey `json:"-"`
}

// TrustedKeys lists trust/*.pub sorted by key ID. A file that does not
// parse is an integrity error (never silently skipped).
func (s *Store) TrustedKeys() ([]TrustedKey, error) {
	entries, err := os.ReadDir(s.trustDir())
	if os.IsNotExist(err) {
		return []TrustedKey{}, nil
	}
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "reading trusted keys")
	}
	out := []TrustedKey{}
	for _, e := range entries {
		p := filepath.Join(s.trustDir(), e.Name())
		if !strings.HasSuffix(e.Name(), ".pub") || !e.Type().IsRegular() {
			return nil, exitcode.New(exitcode.Integrity, "%s: unexpected entry among trusted keys", p).WithReason("damaged_trust")
		}
		text, err := os.ReadFile(p)
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Runtime, err, "reading %s", p)
		}
		k, err := ParsePublicKey(text)
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Integrity, err, "%s", p).WithReason("damaged_trust")
		}
		out = append(out, TrustedKey{KeyID: KeyID(k.ID()), Path: p, Key: k})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].KeyID < out[j].KeyID })
	return out, nil
}

// AddTrust stores a minisign public key as trust/<KEYID>.pub (0600). The
// same key again is a no-op; a different key with the same ID is a
// conflict.
func (s *Store) AddTrust(text []byte) (TrustedKey, error) {
	k, err := ParsePublicKey(text)
	if err != nil {
		return TrustedKey{}, exitcode.Wrap(exitcode.Usage, err, "not a minisign public key").WithReason("bad_public_key")
	}
	if err := mkdirs(s.trustDir()); err != nil {
		return TrustedKey{}, err
	}
	id := KeyID(k.ID())
	p := filepath.Join(s.trustDir(), id+".pub")
	canon, _ := k.MarshalText()
	canon = append(canon, '\n')
	if old, err := os.ReadFile(p); err == nil {
		if prev, perr := ParsePublicKey(old); perr == nil && prev.Equal(k) {
			return TrustedKey{KeyID: id, Path: p, Key: k}, nil
		}
		return TrustedKey{}, exitcode.New(exitcode.Conflict, "%s already holds a different key with ID %s", p, id).WithReason("key_id_taken")
	}
	if err := safefile.Write(p, canon, 0o600); err != nil {
		return TrustedKey{}, exitcode.Wrap(exitcode.Runtime, err, "writing %s", p)
	}
	return TrustedKey{KeyID: id, Path: p, Key: k}, nil
}

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
// refusal is an integrity error (7): malformed or oversized catalog or
// signature; a missing signature where src requires one ("unsigned_catalog");
// an untrusted signer or bad signature; equivocation (an accepted revision
// with different bytes, "catalog_equivocation"); a revision below the
// high-water mark without AllowDowngrade ("catalog_rollback").
func (s *Store) Activate(src Source, data, sig []byte, o ActivateOptions) (*Activation, error) {
	c, err := DecodeCatalog(data, o.ExactLocation)
	if err != nil {
		return nil, err
	}
	act := &Activation{Catalog: c, Warnings: []string{}}
	keys, err := s.TrustedKeys()
	if err != nil {
		return nil, err
	}
	trusted := make([]minisign.PublicKey, len(keys))
	for i, k := range keys {
		trusted[i] = k.Key
	}
	keyID := ""
	switch {
	case sig == nil && src.RequiresSignature():
		return nil, exitcode.New(exitcode.Integrity, "%s: %s requires a catalog signed by a trusted key and %s has none", o.ExactLocation, src, SignatureFile).
			WithReason("unsigned_catalog")
	case sig == nil:
		if o.ExactLocation != src.CatalogLocation() {
			return nil, exitcode.New(exitcode.Integrity, "an unsigned catalog is accepted only from the repository's own %s, not %s", src.CatalogLocation(), o.ExactLocation).
				WithReason("unsigned_catalog")
		}
		act.Warnings = append(act.Warnings, fmt.Sprintf("catalog revision %d from %s is unsigned; selecting this repository is the trust decision", c.Revision, src.Root))
	default:
		id, verr := VerifySignature(trusted, data, sig, c.Revision, o.ExactLocation+".minisig")
		var ee *exitcode.Error
		if verr != nil && errors.As(verr, &ee) && ee.Reason == "unknown_signer" && !src.RequiresSignature() && o.ExactLocation == src.CatalogLocation() {
			act.Warnings = append(act.Warnings, fmt.Sprintf("catalog is signed by untrusted key %s; accepted unsigned because %s was selected explicitly", id, src.Root))
		} else if verr != nil {
			return nil, verr
		} else {
			keyID = id
		}
	}
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	reg, err := s.Registry()
	if err != nil {
		return nil, err
	}
	rec := reg.Repositories[src.Key]
	if rec == nil {
		rec = &Record{Source: src.Root, Accepted: map[string]string{}}
	}
	if rec.Accepted == nil {
		rec.Accepted = map[string]string{}
	}
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
	if err := mkdirs(s.versions()); err != nil {
		return nil, err
	}
	if err := safefile.Write(filepath.Join(s.versions(), name), data, 0o600); err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "storing catalog")
	}
	if sig != nil && keyID != "" {
		if err := safefile.Write(filepath.Join(s.versions(), name+"."+strings.ToLower(keyID)+".minisig"), sig, 0o600); err != nil {
			return nil, exitcode.Wrap(exitcode.Runtime, err, "storing signature")
		}
	}
	rec.Source = src.Root
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

// Reset returns src to the built-in catalog (Barn has none, so nothing is
// active afterwards) and keeps the high-water mark and accepted digests.
func (s *Store) Reset(src Source) (*Record, error) {
	reg, err := s.Registry()
	if err != nil {
		return nil, err
	}
	rec := reg.Repositories[src.Key]
	if rec == nil {
		rec = &Record{Source: src.Root, Accepted: map[string]string{}}
	}
	rec.Active, rec.ActiveRevision, rec.ActiveDigest, rec.KeyID, rec.Downgrade = "", 0, "", "", false
	rec.AcceptedAt = s.now()
	reg.Repositories[src.Key] = rec
	return rec, s.writeRegistry(reg)
}

// Active returns src's active catalog and record. When nothing is active it
// returns an error wrapping imageref.ErrNoCatalog (usage class, reason
// "no_catalog"). The stored bytes are re-hashed and must match the record.
func (s *Store) Active(src Source) (*Catalog, *Record, error) {
	reg, err := s.Registry()
	if err != nil {
		return nil, nil, err
	}
	rec := reg.Repositories[src.Key]
	if rec == nil || rec.Active == "" {
		return nil, rec, exitcode.Wrap(exitcode.Usage, imageref.ErrNoCatalog, "%s", src.Root).WithReason("no_catalog").
			WithNext("barn-repo update --repo " + src.Root)
	}
	c, err := s.load(rec)
	return c, rec, err
}

func (s *Store) load(rec *Record) (*Catalog, error) {
	p := filepath.Join(s.versions(), filepath.Base(rec.Active))
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Integrity, err, "active catalog").WithReason("damaged_registry")
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != rec.ActiveDigest {
		return nil, exitcode.New(exitcode.Integrity, "%s does not match its recorded digest %s", p, rec.ActiveDigest).WithReason("damaged_registry").
			WithNext("barn-repo update")
	}
	return DecodeCatalog(data, p)
}

// ActiveCatalogs returns every repository's active catalog, keyed by the
// repository root (for the cache: pulling an artifact and pruning).
func (s *Store) ActiveCatalogs() (map[string]*Catalog, error) {
	reg, err := s.Registry()
	if err != nil {
		return nil, err
	}
	out := map[string]*Catalog{}
	for _, key := range sortedKeys(reg.Repositories) {
		rec := reg.Repositories[key]
		if rec.Active == "" {
			continue
		}
		c, err := s.load(rec)
		if err != nil {
			return nil, err
		}
		out[rec.Source] = c
	}
	return out, nil
}

// LoadActive returns the active catalog of the configured default
// repository under root's images directory. It returns an error wrapping
// imageref.ErrNoCatalog when no default is configured or nothing is
// active. Commands that see the environment use LoadSelected to honour
// --repo and BARN_REPO.
func LoadActive(root *state.Root) (*Catalog, error) {
	return LoadSelected(root, "", "")
}

// LoadSelected returns the active catalog of the repository selected by
// flag (--repo) > env (BARN_REPO) > the configured default, wrapping
// imageref.ErrNoCatalog when none is selected or active.
func LoadSelected(root *state.Root, flag, env string) (*Catalog, error) {
	s := &Store{Dir: root.ImagesDir()}
	reg, err := s.Registry()
	if err != nil {
		return nil, err
	}
	src, err := Select(flag, env, reg.DefaultRepo)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Usage, imageref.ErrNoCatalog, "no repository selected").WithReason("no_catalog").
			WithNext("barn-repo update --repo DIR|URL --set-default")
	}
	c, _, err := s.Active(src)
	if err != nil {
		return nil, err
	}
	local, err := ReadLocal(s.Dir)
	if err != nil {
		return nil, err
	}
	return c.WithLocal(local), nil
}
