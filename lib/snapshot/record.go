// Package snapshot owns whole-lab snapshots: the records and copies under
// <BARN_HOME>/snapshots/<name>/ (a sibling owner of lib/nodedir, which
// owns nodes/<node>/) and the save, restore and delete transactions.
//
// What a snapshot holds, per node:
//   - every writable qcow2 image (root overlay, data disks, persistent ones
//     included) as an internal qcow2 snapshot tagged "barn-<name>" inside
//     the image itself (metadata only: clusters are shared until written);
//   - for a running lab, guest memory and device state (vmstate) in the
//     root overlay, written by QEMU's snapshot-save job while every node is
//     paused (QMP stop), so the lab is consistent across nodes;
//   - the UEFI vars store (raw nvram.fd) as a byte copy in the snapshot
//     directory; for a memory snapshot QEMU also carries the flash
//     contents in the vmstate and writes them back to nvram.fd on resume;
//   - a copy of Barn's committed node state, the proof a restore checks
//     the node against (same VM UUID, spec hash, generation and image
//     files);
//   - for a memory snapshot, the QEMU it was saved from (Launch): a
//     vmstate loads only into a QEMU with the same devices.
//
// Every transaction writes its record (record.json, state saving,
// restoring or deleting) before it touches an image, and marks each
// finished node in it; see Engine for how an interrupted one converges.
package snapshot

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/fileid"
	"barn.dev/lib/lazyre"
	"barn.dev/lib/safefile"
	"barn.dev/lib/vm"
	"barn.dev/lib/vmrecord"
)

// Schema is the schema of record.json.
const Schema = "barn.snapshot/v2"

// schemaV1 is the record of development builds before Launch: refused
// (dev_build_format), since it cannot prove a memory snapshot fits the
// QEMU it would be loaded into.
const schemaV1 = "barn.snapshot/v1"

// DirName is the snapshots directory under the state root.
const DirName = "snapshots"

// States of a record.
const (
	Saving    = "saving"    // a save is under way or was interrupted: rolled back by delete
	Complete  = "complete"  // usable
	Restoring = "restoring" // a restore is under way or was interrupted: finished by restore again
	Deleting  = "deleting"  // a delete is under way or was interrupted: finished by delete again
)

// Record is <BARN_HOME>/snapshots/<name>/record.json.
type Record struct {
	Schema    string    `json:"schema"`
	Name      string    `json:"name"`
	State     string    `json:"state"`
	Memory    bool      `json:"memory"` // guest memory included (the lab was running)
	Nodes     []Node    `json:"nodes"`
	Paused    []string  `json:"paused"`     // nodes this record's operation paused and has not resumed
	SizeBytes int64     `json:"size_bytes"` // vmstate bytes plus the copies (disk clusters shared with the live images are not counted)
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Node is one node of a snapshot.
type Node struct {
	Node       string  `json:"node"`
	VMUUID     string  `json:"vm_uuid"`
	SpecHash   string  `json:"spec_hash"`
	Generation int64   `json:"generation"`
	Images     []Image `json:"images"`
	// NVRAM is the copy of nvram.fd in the snapshot directory ("" for a
	// bios node), NVRAMPath the node's file it was copied from.
	NVRAM     string     `json:"nvram,omitempty"`
	NVRAMPath string     `json:"nvram_path,omitempty"`
	NVRAMID   *fileid.ID `json:"nvram_id,omitempty"`
	// Launch is the QEMU a memory snapshot was saved from; nil for a
	// disk-only one.
	Launch    *Launch    `json:"launch,omitempty"`
	StateCopy string     `json:"state_copy"`
	StateID   *fileid.ID `json:"state_id,omitempty"`
	Done      bool       `json:"done"` // the current operation finished this node
}

// Launch is the QEMU a node ran when a memory snapshot was saved: what
// QEMU's snapshot-load needs of the QEMU it loads into beyond the node's
// definition (checked by spec hash). Layout is QEMU's own report of its
// vCPUs and memory (hot-plugged devices included, recorded or not);
// Headroom the hot-plug capacity its command line gave it.
type Launch struct {
	Layout   vm.Layout          `json:"layout"`
	Headroom *vmrecord.Headroom `json:"headroom,omitempty"`
	// Relaunchable: Layout is what a launch from the node's definition
	// gives (no hot-plugged device), so a restart can bring it back.
	Relaunchable bool `json:"relaunchable"`
}

// Image is one qcow2 image holding the snapshot's tag: Device is its QMP
// block node name, ID the identity of the file (the node state's record).
type Image struct {
	Device string    `json:"device"`
	Path   string    `json:"path"`
	ID     fileid.ID `json:"id"`
}

// Tag is the internal snapshot tag of snapshot name in every image.
func Tag(name string) string { return "barn-" + name }

var validName = lazyre.New(`^[a-z0-9][a-z0-9_.-]{0,63}$`)

// CheckName refuses a snapshot name that is not 1–64 of [a-z0-9_.-]
// starting with a letter or digit (usage, reason bad_snapshot_name).
func CheckName(name string) error {
	if !validName.MatchString(name) {
		return exitcode.New(exitcode.Usage, "snapshot name %q: use 1-64 characters a-z, 0-9, '_', '.', '-', starting with a letter or digit", name).
			WithReason("bad_snapshot_name")
	}
	return nil
}

// Dir is where snapshot name's record and copies live.
func Dir(root, name string) string { return filepath.Join(root, DirName, name) }

func recordPath(root, name string) string { return filepath.Join(Dir(root, name), "record.json") }

// Read returns snapshot name's record; nil when there is none. A record
// that does not parse or has another schema is an integrity error naming
// it, never "no snapshot".
func Read(root, name string) (*Record, error) {
	p := recordPath(root, name)
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "reading %s", p)
	}
	var r Record
	err = json.Unmarshal(data, &r)
	if err == nil && r.Schema == schemaV1 {
		return nil, exitcode.New(exitcode.Integrity, "%s is a %s record of a development build, which does not record the QEMU a memory snapshot was saved from", p, schemaV1).
			WithReason("dev_build_format").WithNext("move " + Dir(root, name) + " out of " + root + "   # its images keep the internal tag " + Tag(name) + " (qemu-img snapshot -l lists it)")
	}
	if err == nil && r.Memory {
		for _, n := range r.Nodes {
			if n.Launch == nil {
				err = fmt.Errorf("memory snapshot node %s has no launch record", n.Node)
			}
		}
	}
	if err != nil || r.Schema != Schema || r.Name != name {
		return nil, exitcode.New(exitcode.Integrity, "%s is not a %s record for %q (%v)", p, Schema, name, err).
			WithReason("damaged_state").WithNext("move " + Dir(root, name) + " away")
	}
	return &r, nil
}

// All returns every snapshot record, sorted by name.
func All(root string) ([]*Record, error) {
	ents, err := os.ReadDir(filepath.Join(root, DirName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "reading %s", filepath.Join(root, DirName))
	}
	var out []*Record
	for _, e := range ents {
		if !e.IsDir() || CheckName(e.Name()) != nil {
			continue
		}
		r, err := Read(root, e.Name())
		if err != nil {
			return nil, err
		}
		if r != nil {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// write replaces the record atomically, creating its directory (0700).
func write(root string, r *Record, now time.Time) error {
	dir := Dir(root, r.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "creating %s", dir)
	}
	r.UpdatedAt = now
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(recordPath(root, r.Name), data)
}

func writeFile(path string, data []byte) error {
	f, err := safefile.Create(path, 0o600)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "writing %s", path)
	}
	defer f.Cleanup()
	if _, err := f.Write(data); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "writing %s", path)
	}
	if err := f.Commit(); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "writing %s", path)
	}
	return nil
}

// copyIn writes a copy of src into the snapshot directory as name and
// returns its identity (the record deletes it by).
func copyIn(root, snap, name, src string) (*fileid.ID, error) {
	data, err := os.ReadFile(src)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "reading %s", src)
	}
	dst := filepath.Join(Dir(root, snap), name)
	if err := writeFile(dst, data); err != nil {
		return nil, err
	}
	id, err := fileid.OfContent(dst)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "recording %s", dst)
	}
	return &id, nil
}

// removeOwn removes the copy name of snapshot snap only while it is the
// file id records; it returns why it kept a file that is not.
func removeOwn(root, snap, name string, id *fileid.ID) (kept string, err error) {
	if name == "" || id == nil {
		return "", nil
	}
	p := filepath.Join(Dir(root, snap), name)
	why, err := id.Differs(p)
	if fileid.Missing(err) {
		return "", nil
	}
	if err != nil {
		return "", exitcode.Wrap(exitcode.Runtime, err, "checking %s", p)
	}
	if why != "" {
		return p + ": " + why, nil
	}
	return "", safefile.Remove(p)
}
