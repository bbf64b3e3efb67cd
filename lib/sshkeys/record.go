package sshkeys

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/fileid"
	"barn.dev/lib/quote"
	"barn.dev/lib/safefile"
	"barn.dev/lib/wire"
)

// RecordName is the record Barn writes in the keys directory of every
// file it creates there (RecordSchema): what Purge deletes by, never a
// file's name alone.
const RecordName = "keys.json"

// RecordSchema is the schema of keys.json. barn.keys/v1 (device and inode
// only) was written by development builds; it is refused (integrity,
// dev_build_format).
const RecordSchema = "barn.keys/v2"

const earlierRecordSchema = "barn.keys/v1"

// maxRecordBytes bounds the record a reader accepts (64 KiB).
const maxRecordBytes = 64 << 10

// Record is keys.json: for each file Barn created in the keys directory
// (by name), the lib/fileid identity of the file it created — with the
// SHA-256 of the key files, whose bytes never change; without it for
// known_hosts, which ssh appends to.
type Record struct {
	Schema string               `json:"schema"`
	Files  map[string]fileid.ID `json:"files"`
}

// setAsideHint is the way out of a keys directory Barn cannot read: move
// it beside itself under a time-stamped name (mv -n: never over another
// file). Barn then makes new deployment keys, which the guests made with
// the old ones do not trust: the comment says to recreate them.
func setAsideHint(dir string) string {
	to := dir + ".unread-" + time.Now().UTC().Format("20060102T150405Z")
	return fmt.Sprintf("mv -n %s %s   # Barn then makes new deployment keys; guests made with the old ones trust only those: barn-node recreate them",
		quote.ShellIfNeeded(dir), quote.ShellIfNeeded(to))
}

// readRecord reads keys.json: an empty record when it does not exist, an
// integrity error naming it when it is damaged or written by an earlier
// development build.
func readRecord(dir string) (*Record, error) {
	rec := &Record{Schema: RecordSchema, Files: map[string]fileid.ID{}}
	p := filepath.Join(dir, RecordName)
	data, _, err := safefile.ReadFile(p, maxRecordBytes, nil)
	if errors.Is(err, fs.ErrNotExist) {
		return rec, nil
	}
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Integrity, err, "keys record %s", p).WithReason("keys_record_damaged")
	}
	var probe struct {
		Schema string `json:"schema"`
	}
	if json.Unmarshal(data, &probe) != nil || probe.Schema != earlierRecordSchema {
		err = wire.DecodeStrict(data, rec)
	} else {
		return nil, exitcode.New(exitcode.Integrity, "keys record %s was written by an earlier development build of Barn (schema %s: device and inode only); this Barn does not read it", p, probe.Schema).
			WithReason("dev_build_format").WithNext(setAsideHint(dir))
	}
	if err == nil && rec.Schema != RecordSchema {
		err = errors.New("schema " + rec.Schema + ", want " + RecordSchema)
	}
	for name, id := range rec.Files {
		if why := id.Valid(); err == nil && why != "" {
			err = errors.New(name + ": " + why)
		}
	}
	if err != nil {
		return nil, exitcode.New(exitcode.Integrity, "keys record %s: %v", p, err).WithReason("keys_record_damaged")
	}
	if rec.Files == nil {
		rec.Files = map[string]fileid.ID{}
	}
	return rec, nil
}

// note records name (just created by Barn in dir) in keys.json, with the
// SHA-256 of its bytes when digest.
func note(dir, name string, digest bool) error {
	rec, err := readRecord(dir)
	if err != nil {
		return err
	}
	p := filepath.Join(dir, name)
	of := fileid.Of
	if digest {
		of = fileid.OfContent
	}
	id, err := of(p)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "recording %s", p)
	}
	rec.Files[name] = id
	data, err := wire.MarshalIndent(rec)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "encoding %s", RecordName)
	}
	if err := safefile.Write(filepath.Join(dir, RecordName), append(data, '\n'), 0o600); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "writing %s", filepath.Join(dir, RecordName))
	}
	return nil
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
		_, err := os.Lstat(p)
		present := !errors.Is(err, fs.ErrNotExist)
		id, ok := rec.Files[name]
		if !ok {
			if present {
				kept = append(kept, p)
			}
			continue
		}
		why, err := id.Remove(p)
		if err != nil {
			return removed, kept, exitcode.Wrap(exitcode.Runtime, err, "removing %s", p)
		}
		if why != "" {
			kept = append(kept, p)
			continue
		}
		if present {
			removed = append(removed, p)
		}
	}
	if err := safefile.Remove(filepath.Join(keysDir, RecordName)); err != nil {
		return removed, kept, exitcode.Wrap(exitcode.Runtime, err, "removing %s", filepath.Join(keysDir, RecordName))
	}
	_ = syscall.Rmdir(keysDir) // only when empty: anything kept keeps it
	return removed, kept, nil
}
