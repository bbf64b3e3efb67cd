package disk

import (
	"context"
	"encoding/json"
	"strings"

	"barn.dev/lib/exitcode"
)

// Internal qcow2 snapshots of a node's writable images while no QEMU holds
// them (a stopped node; a running node's images are snapshotted by its
// QEMU over QMP). Each image is opened as itself only: the json: filename
// gives qcow2 over the file with backing null, so qemu-img never opens a
// file the header names (an overlay's base stays untouched and unread).
// Format: QEMU docs/tools/qemu-img.rst, "snapshot" and "info".

// InternalSnapshot is one internal snapshot of an image as qemu-img info
// lists it.
type InternalSnapshot struct {
	Name        string `json:"name"`
	VMStateSize int64  `json:"vm-state-size"` // bytes of saved guest memory and device state
	DateSec     int64  `json:"date-sec"`
}

// selfOnly is the json: filename opening path as qcow2 with no backing.
func selfOnly(path string) string {
	b, _ := json.Marshal(map[string]any{"driver": "qcow2", "file": map[string]any{"driver": "file", "filename": path}, "backing": nil})
	return "json:" + string(b)
}

// Snapshots lists the internal snapshots of the qcow2 image at path
// (--force-share: also while a QEMU holds it).
func (t Tool) Snapshots(ctx context.Context, path string) ([]InternalSnapshot, error) {
	out, err := t.run(ctx, "info", "--output=json", "--force-share", selfOnly(path))
	if err != nil {
		return nil, err
	}
	var info struct {
		Snapshots []InternalSnapshot `json:"snapshots"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "parsing qemu-img info of %s", path)
	}
	return info.Snapshots, nil
}

// HasSnapshot reports whether the image at path holds the internal
// snapshot tag.
func (t Tool) HasSnapshot(ctx context.Context, path, tag string) (bool, error) {
	snaps, err := t.Snapshots(ctx, path)
	if err != nil {
		return false, err
	}
	for _, s := range snaps {
		if s.Name == tag {
			return true, nil
		}
	}
	return false, nil
}

// CreateSnapshot records the internal snapshot tag in the image at path
// (disk only). An image that already holds tag is left as it is.
func (t Tool) CreateSnapshot(ctx context.Context, path, tag string) error {
	if ok, err := t.HasSnapshot(ctx, path, tag); err != nil || ok {
		return err
	}
	_, err := t.run(ctx, "snapshot", "-c", tag, selfOnly(path))
	return err
}

// ApplySnapshot reverts the image at path to its internal snapshot tag.
// A missing tag is an integrity error, reason snapshot_missing.
func (t Tool) ApplySnapshot(ctx context.Context, path, tag string) error {
	ok, err := t.HasSnapshot(ctx, path, tag)
	if err != nil {
		return err
	}
	if !ok {
		return exitcode.New(exitcode.Integrity, "%s holds no snapshot %q", path, tag).WithReason("snapshot_missing")
	}
	_, err = t.run(ctx, "snapshot", "-a", tag, selfOnly(path))
	return err
}

// DeleteSnapshot removes the internal snapshot tag from the image at
// path; an image without it is left as it is (deletes are resumed).
func (t Tool) DeleteSnapshot(ctx context.Context, path, tag string) error {
	_, err := t.run(ctx, "snapshot", "-d", tag, selfOnly(path))
	if err != nil && strings.Contains(err.Error(), "snapshot not found") {
		return nil
	}
	return err
}
