package sshkeys

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/fileid"
)

func TestEnsureCreatesEd25519Pair(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	kp, err := Ensure(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(kp.Public, "ssh-ed25519 ") || !strings.HasSuffix(kp.Public, " barn") {
		t.Fatalf("public = %q", kp.Public)
	}
	for path, mode := range map[string]os.FileMode{dir: 0o700, kp.PrivatePath: 0o600, kp.PublicPath: 0o644, kp.KnownHosts: 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s mode %04o, want %04o", path, fi.Mode().Perm(), mode)
		}
	}
	// Idempotent: the same pair comes back.
	again, err := Ensure(dir, true)
	if err != nil || again.Public != kp.Public {
		t.Fatalf("second Ensure: %v %q", err, again.Public)
	}
	// OpenSSH accepts the private key and derives the same public key.
	if _, err := exec.LookPath("ssh-keygen"); err == nil {
		out, err := exec.Command("ssh-keygen", "-y", "-f", kp.PrivatePath).Output()
		if err != nil {
			t.Fatalf("ssh-keygen -y: %v", err)
		}
		if !strings.HasPrefix(kp.Public, strings.TrimSpace(string(out))) {
			t.Errorf("ssh-keygen derives %q, we have %q", out, kp.Public)
		}
	}
}

func TestEnsureRederivesMissingPublicKey(t *testing.T) {
	dir := t.TempDir()
	kp, err := Ensure(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(kp.PublicPath); err != nil {
		t.Fatal(err)
	}
	got, err := Ensure(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(got.PublicPath)
	if got.Public != kp.Public || strings.TrimSpace(string(b)) != kp.Public {
		t.Fatalf("re-derived %q / file %q, want %q", got.Public, b, kp.Public)
	}
}

func TestEnsureNeverReplacesPrivateKeyWithVMs(t *testing.T) {
	dir := t.TempDir()
	kp, _ := Ensure(dir, false)
	if err := os.Remove(kp.PrivatePath); err != nil {
		t.Fatal(err)
	}
	_, err := Ensure(dir, true)
	e := exitcode.As(err)
	if e == nil || e.Class != exitcode.Integrity || e.Reason != "deployment_key_missing" {
		t.Fatalf("err = %v, want integrity deployment_key_missing", err)
	}
	if _, err := os.Stat(kp.PrivatePath); !os.IsNotExist(err) {
		t.Fatal("a replacement private key was generated")
	}
	// Without VMs a new pair is fine and replaces the orphaned public key.
	nk, err := Ensure(dir, false)
	if err != nil || nk.Public == kp.Public {
		t.Fatalf("new pair: %v (same public key: %v)", err, nk.Public == kp.Public)
	}
}

func TestEnsureRefusesMismatchedOrLooseKeys(t *testing.T) {
	dir := t.TempDir()
	kp, _ := Ensure(dir, false)
	other, _ := Ensure(t.TempDir(), false)
	if err := os.WriteFile(kp.PublicPath, []byte(other.Public+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if e := exitcode.As(mustErr(Ensure(dir, true))); e == nil || e.Reason != "deployment_key_mismatch" {
		t.Fatalf("mismatch: %v", e)
	}
	_ = os.WriteFile(kp.PublicPath, []byte(kp.Public+"\n"), 0o644)
	_ = os.Chmod(kp.PrivatePath, 0o644)
	if e := exitcode.As(mustErr(Ensure(dir, true))); e == nil || e.Reason != "deployment_key_mode" {
		t.Fatalf("loose mode: %v", e)
	}
	_ = os.Chmod(kp.PrivatePath, 0o600)
	_ = os.WriteFile(kp.PrivatePath, []byte("garbage"), 0o600)
	if e := exitcode.As(mustErr(Ensure(dir, true))); e == nil || e.Reason != "deployment_key_invalid" {
		t.Fatalf("garbage: %v", e)
	}
}

func TestEnsureRefusesRSAKey(t *testing.T) {
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		t.Skip("ssh-keygen not installed")
	}
	dir := t.TempDir()
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "rsa", "-b", "2048", "-N", "", "-f", filepath.Join(dir, PrivateName)).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if e := exitcode.As(mustErr(Ensure(dir, true))); e == nil || e.Reason != "deployment_key_invalid" {
		t.Fatalf("rsa: %v", e)
	}
}

func mustErr(_ KeyPair, err error) error { return err }

func TestHostKeyAlias(t *testing.T) {
	a := HostKeyAlias("6F9619FF-8B86-D011-B42D-00C04FC964FF")
	if a != HostKeyAlias("6f9619ff-8b86-d011-b42d-00c04fc964ff") {
		t.Error("alias depends on case")
	}
	// sha256("6f9619ff-8b86-d011-b42d-00c04fc964ff")
	out, err := exec.Command("sh", "-c", "printf %s 6f9619ff-8b86-d011-b42d-00c04fc964ff | sha256sum").Output()
	if err == nil {
		if want := "barn-" + strings.Fields(string(out))[0]; a != want {
			t.Errorf("alias = %s, want %s", a, want)
		}
	}
	if len(a) != 5+64 || a == HostKeyAlias("00000000-0000-0000-0000-000000000001") {
		t.Errorf("alias = %s", a)
	}
}

// TestPurgeDeletesOnlyRecordedFiles: Purge deletes the key pair and
// known_hosts Barn created (by keys.json), and keeps a same-named file it
// did not: a replaced private key, a known_hosts swapped for another file.
func TestPurgeDeletesOnlyRecordedFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	kp, err := Ensure(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	// ssh appends to known_hosts in place: still the recorded file
	if err := os.WriteFile(kp.KnownHosts, []byte("barn-00 ssh-ed25519 AAAA\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	removed, kept, err := Purge(dir)
	if err != nil || len(removed) != 3 || len(kept) != 0 {
		t.Fatalf("Purge = %v, %v, %v", removed, kept, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatal("keys dir kept after a full purge")
	}

	kp, err = Ensure(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	other, err := Ensure(filepath.Join(t.TempDir(), "other"), false)
	if err != nil {
		t.Fatal(err)
	}
	theirs, _ := os.ReadFile(other.PrivatePath)
	if err := os.WriteFile(kp.PrivatePath, theirs, 0o600); err != nil { // same inode, other bytes
		t.Fatal(err)
	}
	swapped := kp.KnownHosts + ".new"
	if err := os.WriteFile(swapped, []byte("host.example ssh-ed25519 AAAA\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(swapped, kp.KnownHosts); err != nil { // same bytes would not matter: another file
		t.Fatal(err)
	}
	removed, kept, err = Purge(dir)
	if err != nil || len(removed) != 1 || removed[0] != kp.PublicPath || len(kept) != 2 {
		t.Fatalf("Purge = %v, %v, %v", removed, kept, err)
	}
	if b, _ := os.ReadFile(kp.PrivatePath); string(b) != string(theirs) {
		t.Fatal("a private key Barn did not write was deleted")
	}
	if b, _ := os.ReadFile(kp.KnownHosts); string(b) != "host.example ssh-ed25519 AAAA\n" {
		t.Fatal("a replaced known_hosts was deleted")
	}
}

// A purge killed after moving the private key aside to delete it
// (fileid.Remove) is finished by the next purge: the key under its
// removing name is deleted by its identity, and the directory goes.
func TestPurgeFinishesAnInterruptedPurge(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	kp, err := Ensure(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(kp.PrivatePath, fileid.RemovingName(kp.PrivatePath)); err != nil {
		t.Fatal(err)
	}
	removed, kept, err := Purge(dir)
	if err != nil || len(removed) != 2 || len(kept) != 0 {
		t.Fatalf("Purge = %v, %v, %v", removed, kept, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		entries, _ := os.ReadDir(dir)
		t.Fatalf("keys dir kept after finishing a purge: %v", entries)
	}
}

// TestEnsureNeverDeletesAForeignPublicKey: a public key without its
// private key is replaced only when keys.json proves Barn wrote it.
func TestEnsureNeverDeletesAForeignPublicKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(dir, PublicName)
	if err := os.WriteFile(pub, []byte("ssh-ed25519 AAAAtheirs someone\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Ensure(dir, false)
	if e := exitcode.As(err); e == nil || e.Class != exitcode.Integrity || !strings.Contains(e.Message, "not the public key Barn wrote") {
		t.Fatalf("Ensure over a foreign public key: %v", err)
	}
	if b, _ := os.ReadFile(pub); string(b) != "ssh-ed25519 AAAAtheirs someone\n" {
		t.Fatal("the foreign public key was changed")
	}
	if _, err := os.Stat(filepath.Join(dir, PrivateName)); !os.IsNotExist(err) {
		t.Fatal("a private key was generated beside a foreign public key")
	}
}

// TestEnsureDropsAStalePublicKeyByIdentity: the public key Barn wrote,
// left without its private key, goes through the identity keys.json
// records: a removal an earlier run cut short (the file already moved to
// its fileid.RemovingName) is finished, and a public key swapped in at
// the name, even one with the recorded bytes, is kept.
func TestEnsureDropsAStalePublicKeyByIdentity(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	kp, err := Ensure(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(kp.PrivatePath); err != nil {
		t.Fatal(err)
	}
	moved := fileid.RemovingName(kp.PublicPath)
	if err := os.Rename(kp.PublicPath, moved); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(dir, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(moved); !os.IsNotExist(err) {
		t.Fatalf("the interrupted removal of Barn's stale public key was not finished: %v", err)
	}

	// Same bytes as the recorded key, another file: not Barn's.
	oldPub, err := os.ReadFile(kp.PublicPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(kp.PrivatePath); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(kp.PublicPath); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kp.PublicPath, oldPub, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Ensure(dir, false)
	if e := exitcode.As(err); e == nil || e.Class != exitcode.Integrity || e.Reason != "deployment_key_mismatch" {
		t.Fatalf("Ensure over a copy of a stale public key: %v", err)
	}
	if b, _ := os.ReadFile(kp.PublicPath); string(b) != string(oldPub) {
		t.Fatal("a public key Barn did not write was removed")
	}
}

// TestEarlierDevBuildRecordIsRefused: a keys.json of schema barn.keys/v1
// (device and inode only, written by development builds) is refused as
// integrity, reason dev_build_format, naming it; Purge deletes nothing.
func TestEarlierDevBuildRecordIsRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	kp, err := Ensure(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(dir, RecordName)
	v1 := `{"schema":"barn.keys/v1","files":{"id_ed25519":{"device":2049,"inode":12,"sha256":"` + strings.Repeat("a", 64) + `","created_at":"2026-01-01T00:00:00Z"}}}` + "\n"
	if err := os.WriteFile(rec, []byte(v1), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = Purge(dir)
	if e := exitcode.As(err); e == nil || e.Class != exitcode.Integrity || e.Reason != "dev_build_format" || !strings.Contains(e.Message, rec) || e.Next == "" {
		t.Fatalf("Purge with a v1 record: %v", err)
	}
	// the way out moves the directory aside (never over a file) and says
	// that guests made with the old keys must be recreated
	if e := exitcode.As(err); !strings.HasPrefix(e.Next, "mv -n "+dir+" "+dir+".unread-") || !strings.Contains(e.Next, "barn-node recreate") {
		t.Fatalf("next: %q", e.Next)
	}
	if _, err := os.Stat(kp.PrivatePath); err != nil {
		t.Fatalf("private key deleted: %v", err)
	}
	// the current record reads back with fileid identities
	if err := os.Remove(rec); err != nil {
		t.Fatal(err)
	}
	if err := note(dir, PrivateName, true); err != nil {
		t.Fatal(err)
	}
	r, err := readRecord(dir)
	if err != nil || r.Schema != RecordSchema || r.Files[PrivateName].SHA256 == "" {
		t.Fatalf("record = %+v, %v", r, err)
	}
	if why, err := r.Files[PrivateName].Differs(filepath.Join(dir, PrivateName)); err != nil || why != "" {
		t.Fatalf("the recorded identity does not match the key it names: %q, %v", why, err)
	}
}
