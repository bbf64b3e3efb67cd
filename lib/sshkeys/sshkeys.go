// Package sshkeys owns the deployment's one Ed25519 key pair and the
// per-instance host-key trust used for management SSH.
//
// Layout under keysDir (normally <BARN_HOME>/keys, see lib/state):
//
//	id_ed25519      private key, OpenSSH format, 0600
//	id_ed25519.pub  authorized_keys line "ssh-ed25519 AAAA… barn", 0644
//	known_hosts     host keys recorded under HostKeyAlias names, 0600
//	keys.json       the record of each file above Barn created (Purge)
//
// Host keys are trusted per VM instance UUID, never per 127.0.0.1:port, so a
// recreated VM on a reused port does not inherit its predecessor's key while
// a changed key for the same instance still fails
// (StrictHostKeyChecking=accept-new + HostKeyAlias).
package sshkeys

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/ssh"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/safefile"
)

// File names inside the keys directory.
const (
	PrivateName    = "id_ed25519"
	PublicName     = "id_ed25519.pub"
	KnownHostsName = "known_hosts"
	// Comment is the comment of the public key line.
	Comment = "barn"
)

// KeyPair locates the deployment key pair and its known_hosts file.
type KeyPair struct {
	PrivatePath string `json:"private_path"`
	PublicPath  string `json:"public_path"`
	KnownHosts  string `json:"known_hosts"`
	Public      string `json:"public"` // authorized_keys line without newline: "ssh-ed25519 AAAA… barn"
}

// HostKeyAlias is the known_hosts name of a VM instance:
// "barn-" + hex(sha256(lower(vmUUID))).
func HostKeyAlias(vmUUID string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(vmUUID)))
	return "barn-" + hex.EncodeToString(sum[:])
}

// Paths returns the key pair paths under keysDir without touching the disk
// (Public is empty).
func Paths(keysDir string) KeyPair {
	return KeyPair{
		PrivatePath: filepath.Join(keysDir, PrivateName),
		PublicPath:  filepath.Join(keysDir, PublicName),
		KnownHosts:  filepath.Join(keysDir, KnownHostsName),
	}
}

// Ensure returns the deployment key pair under keysDir, creating what is
// missing:
//   - no private key and no VMs (haveVMs false): a new Ed25519 pair is
//     generated (golang.org/x/crypto/ssh) and written atomically;
//   - no private key but VMs exist: integrity error reason
//     "deployment_key_missing" — a replacement identity is never generated
//     for existing guests (restore the key from backup);
//   - private key present, public key missing: the public key is re-derived;
//   - public key present but not matching the private key: integrity error
//     reason "deployment_key_mismatch".
//
// keysDir is created 0700; known_hosts is created empty 0600 when missing.
// A private key that is not Ed25519, is unparsable, is a symlink or is
// group/world accessible is an integrity error naming the file.
func Ensure(keysDir string, haveVMs bool) (KeyPair, error) {
	kp := Paths(keysDir)
	if err := os.MkdirAll(keysDir, 0o700); err != nil {
		return kp, exitcode.Wrap(exitcode.Runtime, err, "create keys directory %s", keysDir)
	}
	if fi, err := os.Lstat(keysDir); err != nil || !fi.IsDir() {
		return kp, exitcode.New(exitcode.Integrity, "keys directory %s is not a directory", keysDir).WithReason("keys_dir_invalid")
	}
	priv, err := readPrivate(kp.PrivatePath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if haveVMs {
			return kp, exitcode.New(exitcode.Integrity,
				"deployment private key %s is missing while VMs exist; Barn never replaces the identity of existing guests", kp.PrivatePath).
				WithReason("deployment_key_missing").
				WithNext("restore " + kp.PrivatePath + " from backup")
		}
		// A public key left from a vanished pair is replaced only when the
		// record proves Barn wrote it; anyone else's is never deleted.
		if err := dropStalePublic(keysDir, kp.PublicPath); err != nil {
			return kp, err
		}
		priv, err = generate(kp.PrivatePath)
		if err != nil {
			return kp, err
		}
		if err := note(keysDir, PrivateName, true); err != nil {
			return kp, err
		}
	case err != nil:
		return kp, err
	}
	if kp.Public, err = ensurePublic(keysDir, kp, priv); err != nil {
		return kp, err
	}
	if _, err := os.Lstat(kp.KnownHosts); errors.Is(err, fs.ErrNotExist) {
		if err := safefile.Write(kp.KnownHosts, nil, 0o600); err != nil {
			return kp, exitcode.Wrap(exitcode.Runtime, err, "create %s", kp.KnownHosts)
		}
		if err := note(keysDir, KnownHostsName, false); err != nil {
			return kp, err
		}
	}
	return kp, nil
}

// ensurePublic returns the authorized_keys line of private key priv and
// writes it to kp.PublicPath when that file is missing; an existing file
// must hold the same key (deployment_key_mismatch).
func ensurePublic(keysDir string, kp KeyPair, priv ed25519.PrivateKey) (string, error) {
	sshPub, err := ssh.NewPublicKey(priv.Public())
	if err != nil {
		return "", exitcode.Wrap(exitcode.Runtime, err, "derive public key")
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub))) + " " + Comment
	have, err := os.ReadFile(kp.PublicPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := safefile.Write(kp.PublicPath, []byte(line+"\n"), 0o644); err != nil {
			return "", exitcode.Wrap(exitcode.Runtime, err, "write %s", kp.PublicPath)
		}
		if err := note(keysDir, PublicName, true); err != nil {
			return "", err
		}
	case err != nil:
		return "", exitcode.Wrap(exitcode.Runtime, err, "read %s", kp.PublicPath)
	default:
		got, _, _, _, perr := ssh.ParseAuthorizedKey(have)
		if perr != nil || !bytes.Equal(got.Marshal(), sshPub.Marshal()) {
			return "", exitcode.New(exitcode.Integrity, "public key %s does not match private key %s", kp.PublicPath, kp.PrivatePath).
				WithReason("deployment_key_mismatch").
				WithNext("rm " + kp.PublicPath + " (it is re-derived from the private key)")
		}
	}
	return line, nil
}

// dropStalePublic removes the public key at pub, left without its private
// key, through the identity keys.json records for it (fileid.Remove: the
// file removed is the one checked, and a removal an earlier run cut short
// is finished). A public key the record does not prove is an integrity
// error (nothing is generated over it).
func dropStalePublic(dir, pub string) error {
	rec, err := readRecord(dir)
	if err != nil {
		return err
	}
	id, ok := rec.Files[PublicName]
	if !ok {
		if _, err := os.Lstat(pub); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return foreignPublic(pub, "keys.json records none")
	}
	why, err := id.Remove(pub)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "removing %s", pub)
	}
	if why != "" {
		return foreignPublic(pub, why)
	}
	return nil
}

func foreignPublic(pub, why string) error {
	return exitcode.New(exitcode.Integrity, "%s exists without its private key and is not the public key Barn wrote (%s); not replacing it", pub, why).
		WithReason("deployment_key_mismatch").WithNext("move " + pub + " away, then retry")
}

// PrivateKeyPEM returns the OpenSSH private key bytes of kp (for the control
// node's seed only).
func (kp KeyPair) PrivateKeyPEM() ([]byte, error) {
	if _, err := readPrivate(kp.PrivatePath); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(kp.PrivatePath)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "read %s", kp.PrivatePath)
	}
	return b, nil
}

func readPrivate(path string) (ed25519.PrivateKey, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, exitcode.Wrap(exitcode.Runtime, err, "stat %s", path)
	}
	if !fi.Mode().IsRegular() {
		return nil, exitcode.New(exitcode.Integrity, "deployment private key %s is not a regular file", path).WithReason("deployment_key_invalid")
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, exitcode.New(exitcode.Integrity, "deployment private key %s has mode %04o; want 0600", path, fi.Mode().Perm()).
			WithReason("deployment_key_mode").WithNext("chmod 600 " + path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "read %s", path)
	}
	raw, err := ssh.ParseRawPrivateKey(data)
	if err != nil {
		return nil, exitcode.New(exitcode.Integrity, "deployment private key %s: %v", path, err).WithReason("deployment_key_invalid")
	}
	switch k := raw.(type) {
	case ed25519.PrivateKey:
		return k, nil
	case *ed25519.PrivateKey:
		return *k, nil
	default:
		return nil, exitcode.New(exitcode.Integrity, "deployment private key %s is %T; Barn requires Ed25519", path, raw).WithReason("deployment_key_invalid")
	}
}

func generate(path string) (ed25519.PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "generate Ed25519 key")
	}
	block, err := ssh.MarshalPrivateKey(priv, Comment)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "encode private key")
	}
	if err := safefile.Write(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "write %s", path)
	}
	return priv, nil
}

// String is for diagnostics.
func (kp KeyPair) String() string { return fmt.Sprintf("key %s", kp.PrivatePath) }
