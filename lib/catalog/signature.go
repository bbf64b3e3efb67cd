package catalog

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"aead.dev/minisign"

	"barn.dev/lib/exitcode"
)

// KeyID formats a minisign key ID the way minisign prints it: 16 upper-case
// hex digits.
func KeyID(id uint64) string { return fmt.Sprintf("%016X", id) }

// TrustedComment is the signed comment of a catalog signature. It names the
// revision and the catalog digest, so a signature cannot be presented as
// vouching for another revision:
// "barn-catalog revision:<N> sha256:<hex>".
func TrustedComment(revision uint64, data []byte) string {
	sum := sha256.Sum256(data)
	return fmt.Sprintf("barn-catalog revision:%d sha256:%s", revision, hex.EncodeToString(sum[:]))
}

// GenerateKey returns a new minisign key pair as text: the secret key
// (encrypted with password when password is non-empty, else stored
// unencrypted — acceptable for lab repositories only) and the public key.
func GenerateKey(password string) (secret, public []byte, id string, err error) {
	pub, priv, err := minisign.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, "", err
	}
	if password != "" {
		secret, err = minisign.EncryptKey(password, priv)
	} else {
		secret, err = priv.MarshalText()
	}
	if err != nil {
		return nil, nil, "", err
	}
	public, _ = pub.MarshalText()
	return secret, append(public, '\n'), KeyID(pub.ID()), nil
}

// ParseSecretKey decodes a minisign secret key; password is needed only for
// an encrypted key.
func ParseSecretKey(text []byte, password string) (minisign.PrivateKey, error) {
	var k minisign.PrivateKey
	if minisign.IsEncrypted(text) {
		if password == "" {
			return k, fmt.Errorf("the secret key is encrypted; give its password")
		}
		return minisign.DecryptKey(password, text)
	}
	err := k.UnmarshalText(text)
	return k, err
}

// ParsePublicKey decodes a minisign public key file's text.
func ParsePublicKey(text []byte) (minisign.PublicKey, error) {
	var k minisign.PublicKey
	err := k.UnmarshalText([]byte(strings.TrimSpace(string(text))))
	return k, err
}

// Sign returns a detached minisign signature of catalog bytes data whose
// trusted comment is TrustedComment(revision, data).
func Sign(key minisign.PrivateKey, data []byte, revision uint64) []byte {
	return minisign.SignWithComments(key, data, TrustedComment(revision, data), "signature from barn-repo secret key "+KeyID(key.ID()))
}

// VerifySignature checks a detached signature over catalog bytes data
// against the trusted keys and requires its trusted comment to name
// revision and the digest of data. It returns the signer's key ID. Every
// failure is an *exitcode.Error of class integrity: reasons
// "signature_too_large", "bad_signature" (malformed or not valid),
// "unknown_signer", "signature_comment_mismatch".
func VerifySignature(trusted []minisign.PublicKey, data, sig []byte, revision uint64, source string) (string, error) {
	if len(sig) > MaxSignatureBytes {
		return "", exitcode.New(exitcode.Integrity, "%s: signature is larger than %d bytes", source, MaxSignatureBytes).WithReason("signature_too_large")
	}
	var s minisign.Signature
	if err := s.UnmarshalText(sig); err != nil {
		return "", exitcode.New(exitcode.Integrity, "%s: malformed minisign signature: %v", source, err).WithReason("bad_signature")
	}
	id := KeyID(s.KeyID)
	for _, k := range trusted {
		if k.ID() != s.KeyID {
			continue
		}
		if !minisign.Verify(k, data, sig) {
			return id, exitcode.New(exitcode.Integrity, "%s: signature by key %s does not verify: the catalog or its trusted comment was altered", source, id).WithReason("bad_signature")
		}
		if want := TrustedComment(revision, data); s.TrustedComment != want {
			return id, exitcode.New(exitcode.Integrity, "%s: trusted comment %q does not name this catalog (want %q)", source, s.TrustedComment, want).WithReason("signature_comment_mismatch")
		}
		return id, nil
	}
	return id, exitcode.New(exitcode.Integrity, "%s: signed by key %s, which is not trusted", source, id).
		WithReason("unknown_signer").WithNext("barn-repo trust add KEY.pub   # only after checking the key out of band")
}
