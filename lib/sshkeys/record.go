package sshkeys

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/safefile"
	"barn.dev/lib/wire"
)

// RecordName is the record Barn writes in the keys directory of every
// file it creates there (RecordSchema): what Purge deletes by, never a
// file's name alone.
const RecordName = "keys.json"

// RecordSchema is the schema of keys.json.
const RecordSchema = "barn.keys/v1"

// maxRecordBytes bounds the record a reader accepts (64 KiB).
const maxRecordBytes = 64 << 10

// Record is keys.json: for each file Barn created in the keys directory
// (by name), the identity of the file it created and, for the key files
// whose bytes never change, their digest.
type Record struct {
	Schema string                `json:"schema"`
	Files  map[string]FileRecord `json:"files"`
}

// FileRecord identifies one file Barn created.
type FileRecord struct {
	Device    uint64    `json:"device"`
	Inode     uint64    `json:"inode"`
	SHA256    string    `json:"sha256,omitempty"` // lower-case hex; empty for known_hosts, which ssh appends to
	CreatedAt time.Time `json:"created_at"`
}

// readRecord reads keys.json: an empty record when it does not exist, an
// integrity error naming it when it is damaged.
func readRecord(dir string) (*Record, error) {
	rec := &Record{Schema: RecordSchema, Files: map[string]FileRecord{}}
	p := filepath.Join(dir, RecordName)
	data, _, err := safefile.ReadFile(p, maxRecordBytes, nil)
	if errors.Is(err, fs.ErrNotExist) {
		return rec, nil
	}
	if err == nil {
		err = wire.DecodeStrict(data, rec)
	}
	if err == nil && rec.Schema != RecordSchema {
		err = errors.New("schema " + rec.Schema + ", want " + RecordSchema)
	}
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Integrity, err, "keys record %s", p).WithReason("keys_record_damaged")
	}
	if rec.Files == nil {
		rec.Files = map[string]FileRecord{}
	}
	return rec, nil
}

// note records name (just created by Barn in dir) in keys.json.
func note(dir, name string, digest bool) error {
	rec, err := readRecord(dir)
	if err != nil {
		return err
	}
	p := filepath.Join(dir, name)
	fr, err := identify(p, digest)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "recording %s", p)
	}
	fr.CreatedAt = time.Now().UTC()
	rec.Files[name] = fr
	data, err := wire.MarshalIndent(rec)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "encoding %s", RecordName)
	}
	if err := safefile.Write(filepath.Join(dir, RecordName), append(data, '\n'), 0o600); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "writing %s", filepath.Join(dir, RecordName))
	}
	return nil
}

// identify reads the identity (and, with digest, the SHA-256) of the
// regular file at p, never following a symlink.
func identify(p string, digest bool) (FileRecord, error) {
	f, fi, err := safefile.Open(p)
	if err != nil {
		return FileRecord{}, err
	}
	defer f.Close()
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return FileRecord{}, errors.New("no inode information")
	}
	fr := FileRecord{Device: uint64(st.Dev), Inode: st.Ino}
	if digest {
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return FileRecord{}, err
		}
		fr.SHA256 = hex.EncodeToString(h.Sum(nil))
	}
	return fr, nil
}

// recorded reports whether the file at dir/name is the one keys.json
// records Barn created: same device and inode and, when a digest was
// recorded, the same bytes.
func (r *Record) recorded(dir, name string) bool {
	want, ok := r.Files[name]
	if !ok {
		return false
	}
	got, err := identify(filepath.Join(dir, name), want.SHA256 != "")
	return err == nil && got.Device == want.Device && got.Inode == want.Inode && got.SHA256 == want.SHA256
}

// Purge deletes the files keys.json records Barn created in keysDir — the
// private key and public key only with their recorded bytes, known_hosts
// only as the very file Barn created — then the record and the emptied
// directory. A file at one of those names that the record does not prove
// is Barn's (an operator's key, a restored or replaced file) is kept and
// listed in kept; so is the directory then. A damaged record deletes
// nothing (integrity).
func Purge(keysDir string) (removed, kept []string, err error) {
	if _, err := os.Lstat(keysDir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	rec, err := readRecord(keysDir)
	if err != nil {
		return nil, nil, err
	}
	for _, name := range []string{PrivateName, PublicName, KnownHostsName} {
		p := filepath.Join(keysDir, name)
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if !rec.recorded(keysDir, name) {
			kept = append(kept, p)
			continue
		}
		if err := safefile.Remove(p); err != nil {
			return removed, kept, exitcode.Wrap(exitcode.Runtime, err, "removing %s", p)
		}
		removed = append(removed, p)
	}
	if err := safefile.Remove(filepath.Join(keysDir, RecordName)); err != nil {
		return removed, kept, exitcode.Wrap(exitcode.Runtime, err, "removing %s", filepath.Join(keysDir, RecordName))
	}
	_ = syscall.Rmdir(keysDir) // only when empty: anything kept keeps it
	return removed, kept, nil
}
