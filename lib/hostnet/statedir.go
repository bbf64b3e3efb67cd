package hostnet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/wire"
)

// StateDirSchema is the schema of <StateDir>/created.json.
const StateDirSchema = "barn.net.state-dir/v1"

// StateDirRecord is <StateDir>/created.json (0600): the directories Barn
// created to hold its manifests (StateDir and any missing parents,
// outermost first). When the last manifest is removed and nothing but this
// record is left in StateDir, they are removed again, innermost first, so
// the host is as before; a StateDir that existed before Barn has no record
// and is never removed.
type StateDirRecord struct {
	Schema  string   `json:"schema"`
	Created []string `json:"created"`
}

// StateDirRecordPath is <StateDir>/created.json.
func (h *Host) StateDirRecordPath() string { return filepath.Join(h.StateDir, "created.json") }

// ensureStateDir creates StateDir (0755) when it is missing, recording
// what it created first.
func (h *Host) ensureStateDir() error {
	fi, err := os.Lstat(h.StateDir)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return fmt.Errorf("%s is not a directory", h.StateDir)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	var missing []string
	for d := filepath.Clean(h.StateDir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || filepath.Dir(d) == d {
			break
		}
		missing = append([]string{d}, missing...)
	}
	if err := os.MkdirAll(h.StateDir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", h.StateDir, err)
	}
	b, err := wire.MarshalIndent(StateDirRecord{Schema: StateDirSchema, Created: missing})
	if err != nil {
		return err
	}
	return writeAtomic(h.StateDirRecordPath(), append(b, '\n'), 0o600)
}

// releaseStateDir removes the directories the record says Barn created,
// innermost first, once StateDir holds nothing but the record. It returns
// what it removed; without a record, or with anything else in StateDir,
// it removes nothing.
func (h *Host) releaseStateDir() ([]string, error) {
	b, err := readOwned(h.StateDirRecordPath())
	if b == nil || err != nil {
		return nil, err
	}
	var rec StateDirRecord
	if err := wire.DecodeStrict(b, &rec); err != nil || rec.Schema != StateDirSchema {
		return nil, exitcode.New(exitcode.Integrity, "%s is damaged (%v)", h.StateDirRecordPath(), err).WithReason("manifest_damaged")
	}
	ents, err := os.ReadDir(h.StateDir)
	if err != nil {
		return nil, err
	}
	if len(ents) != 1 {
		return nil, nil // a manifest or something that is not Barn's is still there
	}
	if err := os.Remove(h.StateDirRecordPath()); err != nil {
		return nil, err
	}
	var removed []string
	for i := len(rec.Created) - 1; i >= 0; i-- {
		d := rec.Created[i]
		if err := syscall.Rmdir(d); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			break // not empty (something else lives there now) or not ours to remove
		}
		removed = append(removed, d)
	}
	return removed, nil
}
