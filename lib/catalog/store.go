package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"aead.dev/minisign"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/imageref"
	"barn.dev/lib/quote"
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
	Repositories map[string]*Record `json:"repositories"` // by Source.Key
}

// Record is one repository's anti-rollback, activation and signer record.
type Record struct {
	Source          string            `json:"source"`           // repository root
	HighestRevision uint64            `json:"highest_revision"` // high-water mark; never lowered, not even by reset
	Active          string            `json:"active"`           // "" (none), EmbeddedActive, or a versions/ file name
	ActiveRevision  uint64            `json:"active_revision"`
	ActiveDigest    string            `json:"active_digest"` // sha256 of the active catalog bytes
	KeyID           string            `json:"key_id"`        // signer of the active catalog, "" when unsigned or embedded
	AcceptedAt      time.Time         `json:"accepted_at"`
	Downgrade       bool              `json:"downgrade"` // the active catalog is below the mark (--allow-downgrade)
	Accepted        map[string]string `json:"accepted"`  // revision → digest of every catalog ever accepted
	// SignatureRequired is set when a catalog is accepted under a trusted
	// signature: from then on unsigned catalogs (and, as always, unknown
	// signers) are refused for this repository until the user lifts it
	// with `barn-repo trust allow-unsigned` (Store.AllowUnsigned).
	SignatureRequired bool `json:"signature_required"`
	// SignedBy is the last key that signed an accepted catalog, kept when a
	// later catalog is unsigned or the record is reset.
	SignedBy string `json:"signed_by,omitempty"`
	// UnsignedAllowedAt is when the user last lifted SignatureRequired.
	UnsignedAllowedAt *time.Time `json:"unsigned_allowed_at,omitempty"`
}

func (s *Store) manifests() string { return filepath.Join(s.Dir, ManifestsDirName) }
func (s *Store) versions() string  { return filepath.Join(s.manifests(), "versions") }
func (s *Store) trustDir() string  { return filepath.Join(s.Dir, TrustDirName) }
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
// A damaged one, and one a development build wrote (fields no release
// writes, or a record under a non-canonical spelling of its repository),
// is an integrity error (7) naming it, whose next: hint (RegistryReset)
// is the one way out.
func (s *Store) Registry() (*Registry, error) {
	p := s.registryPath()
	data, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		return &Registry{Schema: RegistrySchema, Repositories: map[string]*Record{}}, nil
	}
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "reading %s", p)
	}
	reg := &Registry{}
	if err := wire.DecodeStrict(data, reg); err != nil || reg.Schema != RegistrySchema {
		if err == nil {
			err = fmt.Errorf("schema %q, want %q", reg.Schema, RegistrySchema)
		}
		return nil, exitcode.Wrap(exitcode.Integrity, err, "%s is damaged", p).WithReason("damaged_registry").WithNext(RegistryReset(p))
	}
	if reg.Repositories == nil {
		reg.Repositories = map[string]*Record{}
	}
	for _, key := range sortedKeys(reg.Repositories) {
		if src, err := ParseSource(reg.Repositories[key].Source, true); key != OfficialSlot && (err != nil || src.Key != key) {
			return nil, exitcode.New(exitcode.Integrity, "%s was written by a development build of Barn: its record %q is not kept under its repository's canonical spelling; this Barn does not read it", p, key).
				WithReason("dev_build_format").WithNext(RegistryReset(p))
		}
	}
	return reg, nil
}

// RegistryReset is the way out of a registry Barn cannot read: move it
// aside and activate the catalog again (a fresh registry; the records it
// held, anti-rollback marks included, start over).
func RegistryReset(path string) string {
	return "mv " + quote.ShellIfNeeded(path) + " " + quote.ShellIfNeeded(path+".old") + ", then barn-repo update"
}

func (s *Store) writeRegistry(reg *Registry) error {
	if err := mkdirs(s.manifests(), s.versions()); err != nil {
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

// mkdirs creates dirs in order, each 0700 and checked (an existing
// directory open to others is refused, integrity).
func mkdirs(dirs ...string) error { return state.EnsurePrivateDir(dirs...) }

// TrustedKey is one key in trust/.
type TrustedKey struct {
	KeyID string             `json:"key_id"`
	Path  string             `json:"path"`
	Key   minisign.PublicKey `json:"-"`
}

// keysFor returns the keys allowed to sign src's catalogs: for the official
// repository only its compiled keys; for any other repository those plus
// every key in trust/.
func (s *Store) keysFor(src Source) ([]minisign.PublicKey, error) {
	keys := append([]minisign.PublicKey{}, OfficialRepository().Keys...)
	if src.Official {
		return keys, nil
	}
	added, err := s.TrustedKeys()
	if err != nil {
		return nil, err
	}
	for _, k := range added {
		keys = append(keys, k.Key)
	}
	return keys, nil
}

// officialKeyWithID returns the official repository's compiled key with
// key ID id, if there is one.
func officialKeyWithID(id uint64) (minisign.PublicKey, bool) {
	for _, k := range OfficialRepository().Keys {
		if k.ID() == id {
			return k, true
		}
	}
	return minisign.PublicKey{}, false
}

// TrustedKeys lists trust/*.pub sorted by key ID. A file that does not
// parse, or holds a key other than the official one under an official key
// ID, is an integrity error (never silently skipped).
func (s *Store) TrustedKeys() ([]TrustedKey, error) {
	if fi, err := os.Lstat(s.trustDir()); os.IsNotExist(err) {
		return []TrustedKey{}, nil
	} else if err == nil {
		// a trust directory others can write is no evidence of whom the user trusts
		if err := safefile.CheckPrivateDir(s.trustDir(), fi); err != nil {
			return nil, exitcode.Wrap(exitcode.Integrity, err, "trusted keys").WithReason("damaged_trust").WithNext("chmod 0700 " + s.trustDir())
		}
	}
	entries, err := os.ReadDir(s.trustDir())
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
		if official, ok := officialKeyWithID(k.ID()); ok && !official.Equal(k) {
			return nil, exitcode.New(exitcode.Integrity, "%s: a key that claims ID %s of the official repository's compiled key but is a different key", p, KeyID(k.ID())).
				WithReason("damaged_trust").WithNext("rm " + p)
		}
		out = append(out, TrustedKey{KeyID: KeyID(k.ID()), Path: p, Key: k})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].KeyID < out[j].KeyID })
	return out, nil
}

// AddTrust stores a minisign public key as trust/<KEYID>.pub (0600). The
// same key again is a no-op; a different key with the same ID is a
// conflict. A key ID of the official repository's compiled keys is never
// stored: the official key itself is a usage error (reason "official_key":
// compiled in, it already counts for every repository), another key under
// that ID a conflict (reason "official_key_id": it would show and pin as
// the official signer).
func (s *Store) AddTrust(text []byte) (TrustedKey, error) {
	k, err := ParsePublicKey(text)
	if err != nil {
		return TrustedKey{}, exitcode.Wrap(exitcode.Usage, err, "not a minisign public key").WithReason("bad_public_key")
	}
	if official, ok := officialKeyWithID(k.ID()); ok && official.Equal(k) {
		return TrustedKey{}, exitcode.New(exitcode.Usage, "key %s is the official repository's key, compiled into Barn: it already verifies catalogs of every repository, so there is nothing to add", KeyID(k.ID())).
			WithReason("official_key").WithNext("barn-repo trust list")
	} else if ok {
		return TrustedKey{}, exitcode.New(exitcode.Conflict, "this key claims ID %s, the ID of the official repository's compiled key, but is a different key: refused, since catalogs it signs would read as signed by the official key", KeyID(k.ID())).
			WithReason("official_key_id").WithNext("check the key with its publisher out of band; a genuine key has its own ID (barn-repo keygen makes one)")
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

// Active returns src's active catalog and record. For the official
// repository that is the catalog embedded in the binary until a newer one
// is activated, and again when the binary embeds a newer revision than the
// activated one (unless that one is a recorded downgrade). For any other
// repository with nothing active it returns an error wrapping
// imageref.ErrNoCatalog (usage class, reason "no_catalog"). Stored bytes
// are re-hashed and must match the record (integrity otherwise).
func (s *Store) Active(src Source) (*Catalog, *Record, error) {
	_, rec, err := s.recordOf(src)
	if err != nil {
		return nil, nil, err
	}
	if !src.Official {
		if rec.Active == "" {
			return nil, rec, exitcode.Wrap(exitcode.Usage, imageref.ErrNoCatalog, "%s has no active catalog", src.Root).WithReason("no_catalog").
				WithNext("barn-repo update --repo " + src.Root)
		}
		c, err := s.load(rec)
		return c, rec, err
	}
	emb, digest, err := OfficialRepository().Embedded()
	if err != nil {
		return nil, nil, err
	}
	if rec.Active == EmbeddedActive {
		return emb, rec, nil
	}
	c, err := s.load(rec)
	if err != nil {
		return nil, rec, err
	}
	if c.Revision < emb.Revision && !rec.Downgrade {
		rec.useEmbedded(emb.Revision, digest)
		return emb, rec, nil
	}
	return c, rec, nil
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
// repository root, the official repository's (embedded or activated)
// always included: for the cache, to find an artifact's source and to
// protect artifacts from prune.
func (s *Store) ActiveCatalogs() (map[string]*Catalog, error) {
	reg, err := s.Registry()
	if err != nil {
		return nil, err
	}
	primary, _ := OfficialRepository().Sources()
	c, _, err := s.Active(primary)
	if err != nil {
		return nil, err
	}
	out := map[string]*Catalog{primary.Root: c}
	for _, key := range sortedKeys(reg.Repositories) {
		rec := reg.Repositories[key]
		if key == OfficialSlot || rec.Active == "" {
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

// LoadSelected returns the active catalog of the repository selected by
// flag (--repo) > env (BARN_REPO) > the official repository, with the
// import registry attached. A selected repository with nothing active is an
// error wrapping imageref.ErrNoCatalog.
func LoadSelected(root *state.Root, flag, env string) (*Catalog, error) {
	s := &Store{Dir: root.ImagesDir()}
	src, err := Select(flag, false, env)
	if err != nil {
		return nil, err
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
