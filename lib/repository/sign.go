package repository

import (
	"os"
	"path/filepath"

	"barn.dev/lib/catalog"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/safefile"
)

// KeygenSchema and SignSchema are the result document schemas.
const (
	KeygenSchema = "barn.repo.keygen/v1"
	SignSchema   = "barn.repo.sign/v1"
)

// KeygenResult names the written key files.
type KeygenResult struct {
	Schema    string `json:"schema"`
	KeyID     string `json:"key_id"`     // 16 upper-case hex digits
	SecretKey string `json:"secret_key"` // PREFIX.key, mode 0600
	PublicKey string `json:"public_key"` // PREFIX.pub, mode 0644
	Encrypted bool   `json:"encrypted"`  // false: the secret key is stored unencrypted (lab use)
}

// Keygen writes a new minisign key pair to prefix+".key" (0600) and
// prefix+".pub" (0644). It refuses (conflict, reason "key_exists") to
// overwrite either file. An empty password stores the secret key
// unencrypted, which is acceptable only for lab repositories.
func Keygen(prefix, password string) (*KeygenResult, error) {
	keyPath, pubPath := prefix+".key", prefix+".pub"
	for _, p := range []string{keyPath, pubPath} {
		if _, err := os.Lstat(p); err == nil {
			return nil, exitcode.New(exitcode.Conflict, "%s already exists; refusing to overwrite a key", p).WithReason("key_exists")
		}
	}
	secret, public, id, err := catalog.GenerateKey(password)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "generating key")
	}
	if err := safefile.Write(keyPath, secret, 0o600); err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "writing %s", keyPath)
	}
	if err := safefile.Write(pubPath, public, 0o644); err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "writing %s", pubPath)
	}
	return &KeygenResult{Schema: KeygenSchema, KeyID: id, SecretKey: abs(keyPath), PublicKey: abs(pubPath), Encrypted: password != ""}, nil
}

func abs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// SignResult names the written signature.
type SignResult struct {
	Schema         string `json:"schema"`
	Path           string `json:"path"` // catalog.json.minisig
	KeyID          string `json:"key_id"`
	Revision       uint64 `json:"revision"`
	TrustedComment string `json:"trusted_comment"`
}

// Sign writes root/catalog.json.minisig: a detached minisign signature of
// catalog.json whose trusted comment names the revision and digest. The
// catalog must decode and validate first. Publish the images, then
// catalog.json and this signature together.
func Sign(root, keyPath, password string) (*SignResult, error) {
	if err := CheckRoot(root); err != nil {
		return nil, err
	}
	keyText, err := readLimited(keyPath, 64<<10)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Usage, err, "reading secret key")
	}
	key, err := catalog.ParseSecretKey(keyText, password)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Usage, err, "%s", keyPath).WithReason("bad_secret_key")
	}
	path := filepath.Join(root, catalog.CatalogFile)
	data, err := readLimited(path, catalog.MaxCatalogBytes)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Usage, err, "reading catalog").WithNext("barn-repo build --root " + root)
	}
	c, err := catalog.DecodeCatalog(data, path)
	if err != nil {
		return nil, err
	}
	sig := catalog.Sign(key, data, c.Revision)
	sigPath := filepath.Join(root, catalog.SignatureFile)
	if err := safefile.Write(sigPath, sig, 0o644); err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "writing %s", sigPath)
	}
	return &SignResult{Schema: SignSchema, Path: sigPath, KeyID: catalog.KeyID(key.ID()), Revision: c.Revision, TrustedComment: catalog.TrustedComment(c.Revision, data)}, nil
}
