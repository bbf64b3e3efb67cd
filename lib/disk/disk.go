// Package disk creates and checks a node's qcow2 disks with qemu-img: the
// root overlay over a read-only verified base (explicit backing format,
// grown never shrunk, backing chain read back), standalone data disks, and
// the retained persistent-disk store (store.go).
//
// Every file it creates is written under a temporary name in the target
// directory, checked and published with safefile.PublishNew (0600, fsynced,
// renamed into place); an existing target is never overwritten. Sizes are bytes.
package disk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/fileid"
	"barn.dev/lib/safefile"
	"barn.dev/lib/spec"
)

// Tool runs qemu-img. The zero value runs "qemu-img" from PATH.
type Tool struct {
	QemuImg string        // path or name of qemu-img; "" means "qemu-img"
	Timeout time.Duration // per qemu-img run; 0 means 60 s
}

// Info is the part of `qemu-img info --output=json` that Barn checks.
// Format: QEMU docs/tools/qemu-img.rst, "info".
type Info struct {
	Filename              string `json:"filename"`
	Format                string `json:"format"`
	VirtualSize           int64  `json:"virtual-size"` // bytes
	BackingFilename       string `json:"backing-filename,omitempty"`
	FullBackingFilename   string `json:"full-backing-filename,omitempty"`
	BackingFilenameFormat string `json:"backing-filename-format,omitempty"`
	// FormatSpecific is qemu-img's "format-specific" object; Barn reads
	// only a qcow2 header's external data file from it.
	FormatSpecific struct {
		Data struct {
			DataFile string `json:"data-file,omitempty"`
		} `json:"data"`
	} `json:"format-specific"`
}

// DataFile is the external data file a qcow2 header names (qcow2's
// "external data file name" header extension, QEMU
// docs/interop/qcow2.txt), or "" when the image keeps its data itself.
// QEMU opens that file, read-write, whenever a blockdev leaves its
// data-file option unset, so no header Barn launches may name one.
func (i Info) DataFile() string { return i.FormatSpecific.Data.DataFile }

func (t Tool) bin() string {
	if t.QemuImg != "" {
		return t.QemuImg
	}
	return "qemu-img"
}

func (t Tool) run(ctx context.Context, args ...string) ([]byte, error) {
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, t.bin(), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil && ctx.Err() != context.Canceled {
			return nil, exitcode.New(exitcode.Runtime, "%s %s: timed out after %s", t.bin(), args[0], timeout)
		}
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return nil, exitcode.New(exitcode.Capability, "%s not found: %v", t.bin(), err).
				WithReason("qemu_img_missing").WithNext("apt-get install qemu-utils")
		}
		msg := bytes.TrimSpace(stderr.Bytes())
		return nil, exitcode.New(exitcode.Runtime, "%s %s: %v: %s", t.bin(), args[0], err, msg)
	}
	return stdout.Bytes(), nil
}

// Inspect returns `qemu-img info --output=json` of path. It never follows
// the chain beyond the first backing file (no --backing-chain).
func (t Tool) Inspect(ctx context.Context, path string) (Info, error) {
	out, err := t.run(ctx, "info", "--output=json", "--force-share", path)
	if err != nil {
		return Info{}, err
	}
	var info Info
	if err := json.Unmarshal(out, &info); err != nil {
		return Info{}, exitcode.Wrap(exitcode.Runtime, err, "parsing qemu-img info of %s", path)
	}
	return info, nil
}

// CheckBacking reads the header of overlay (Inspect: the first backing
// file only) and requires a qcow2 image whose backing file is exactly base
// and whose recorded backing format is baseFormat. Anything else, a header
// rewritten to back onto another file (qemu-img rebase -u) included, is an
// integrity error, reason "backing_chain_mismatch", naming both values; a
// header naming an external data file (qemu-img amend -o data_file=) is
// one with reason "disk_header_mismatch".
func (t Tool) CheckBacking(ctx context.Context, overlay, base, baseFormat string) (Info, error) {
	info, err := t.Inspect(ctx, overlay)
	if err != nil {
		return Info{}, err
	}
	switch {
	case info.Format != "qcow2":
		return Info{}, exitcode.New(exitcode.Integrity, "overlay %s is %s, not qcow2", overlay, info.Format).WithReason("backing_chain_mismatch")
	case info.BackingFilename != base:
		return Info{}, exitcode.New(exitcode.Integrity, "overlay %s backs onto %q, expected %q", overlay, info.BackingFilename, base).WithReason("backing_chain_mismatch")
	case info.BackingFilenameFormat != baseFormat:
		return Info{}, exitcode.New(exitcode.Integrity, "overlay %s records backing format %q, expected %q", overlay, info.BackingFilenameFormat, baseFormat).WithReason("backing_chain_mismatch")
	case info.DataFile() != "":
		return Info{}, exitcode.New(exitcode.Integrity, "overlay %s names an external data file %q; Barn never creates one", overlay, info.DataFile()).WithReason("disk_header_mismatch")
	}
	return info, nil
}

// CheckStandalone reads the header of a data disk (Inspect) and requires
// a qcow2 image that names no other file: no backing file and no external
// data file. Anything else is an integrity error, reason
// "disk_header_mismatch", naming the file the header points at.
func (t Tool) CheckStandalone(ctx context.Context, path string) (Info, error) {
	info, err := t.Inspect(ctx, path)
	if err != nil {
		return Info{}, err
	}
	switch {
	case info.Format != "qcow2":
		return Info{}, exitcode.New(exitcode.Integrity, "disk %s is %s, not qcow2", path, info.Format).WithReason("disk_header_mismatch")
	case info.BackingFilename != "":
		return Info{}, exitcode.New(exitcode.Integrity, "disk %s backs onto %q; Barn's data disks have no backing file", path, info.BackingFilename).WithReason("disk_header_mismatch")
	case info.DataFile() != "":
		return Info{}, exitcode.New(exitcode.Integrity, "disk %s names an external data file %q; Barn never creates one", path, info.DataFile()).WithReason("disk_header_mismatch")
	}
	return info, nil
}

// CreateOverlay creates dst, a qcow2 overlay over base whose format is
// baseFormat (passed explicitly with -F; never guessed). The base's format
// is probed first and must equal baseFormat. size must not be below the
// base's virtual size (usage error, reason "root_disk_too_small"); the
// overlay's virtual size is max(size, base virtual size) exactly. The result
// is read back: backing file, backing format and virtual size must match,
// or the overlay is removed and an integrity error returned. base must be
// absolute. dst must not exist.
func (t Tool) CreateOverlay(ctx context.Context, base, baseFormat, dst string, size int64) (Info, error) {
	if !filepath.IsAbs(base) || filepath.Clean(base) != base {
		return Info{}, exitcode.New(exitcode.Usage, "backing file %q is not a clean absolute path", base)
	}
	baseInfo, err := t.Inspect(ctx, base)
	if err != nil {
		return Info{}, err
	}
	if baseInfo.Format != baseFormat {
		return Info{}, exitcode.New(exitcode.Integrity, "base image %s is %s, expected %s", base, baseInfo.Format, baseFormat).
			WithReason("base_format_mismatch")
	}
	if baseInfo.BackingFilename != "" {
		return Info{}, exitcode.New(exitcode.Integrity, "base image %s has its own backing file %q", base, baseInfo.BackingFilename).
			WithReason("base_has_backing_file")
	}
	if v := spec.CheckRootDiskFits(size, baseInfo.VirtualSize); v != nil { // the spec's rule, again on the real base
		return Info{}, exitcode.New(exitcode.Usage, "%s: %s; never shrinking; %s", dst, v.Problem, v.Hint).
			WithReason("root_disk_too_small")
	}
	tmp, err := newScratch(dst)
	if err != nil {
		return Info{}, err
	}
	defer tmp.drop()
	if _, err := t.run(ctx, "create", "-q", "-f", "qcow2", "-b", base, "-F", baseFormat, tmp.path, strconv.FormatInt(size, 10)); err != nil {
		return Info{}, err
	}
	info, err := t.CheckBacking(ctx, tmp.path, base, baseFormat)
	if err != nil {
		return Info{}, err
	}
	if info.VirtualSize != size {
		return Info{}, exitcode.New(exitcode.Integrity, "overlay %s has virtual size %d bytes, expected %d", dst, info.VirtualSize, size)
	}
	if err := publish(tmp.path, dst); err != nil {
		return Info{}, err
	}
	info.Filename = dst
	return info, nil
}

// CreateData creates dst, a standalone sparse qcow2 of size bytes, checked
// to have no backing file. dst must not exist.
func (t Tool) CreateData(ctx context.Context, dst string, size int64) (Info, error) {
	if size <= 0 {
		return Info{}, exitcode.New(exitcode.Usage, "data disk %s: size %d bytes is not positive", dst, size)
	}
	tmp, err := newScratch(dst)
	if err != nil {
		return Info{}, err
	}
	defer tmp.drop()
	if _, err := t.run(ctx, "create", "-q", "-f", "qcow2", tmp.path, strconv.FormatInt(size, 10)); err != nil {
		return Info{}, err
	}
	info, err := t.Inspect(ctx, tmp.path)
	if err != nil {
		return Info{}, err
	}
	if info.Format != "qcow2" || info.BackingFilename != "" || info.VirtualSize != size {
		return Info{}, exitcode.New(exitcode.Integrity, "data disk %s came out wrong: format %s, backing %q, %d bytes", dst, info.Format, info.BackingFilename, info.VirtualSize)
	}
	if err := publish(tmp.path, dst); err != nil {
		return Info{}, err
	}
	info.Filename = dst
	return info, nil
}

// Grow resizes path to size bytes when size is larger than its virtual
// size, and verifies the result. It never shrinks: a smaller size is a usage
// error (reason "disk_shrink_refused"). The VM must be stopped.
func (t Tool) Grow(ctx context.Context, path string, size int64) (Info, error) {
	info, err := t.Inspect(ctx, path)
	if err != nil {
		return Info{}, err
	}
	if size == info.VirtualSize {
		return info, nil
	}
	if size < info.VirtualSize {
		return Info{}, exitcode.New(exitcode.Usage, "%s: refusing to shrink from %d to %d bytes", path, info.VirtualSize, size).
			WithReason("disk_shrink_refused")
	}
	if _, err := t.run(ctx, "resize", "-q", "-f", "qcow2", path, strconv.FormatInt(size, 10)); err != nil {
		return Info{}, err
	}
	after, err := t.Inspect(ctx, path)
	if err != nil {
		return Info{}, err
	}
	if after.VirtualSize != size {
		return Info{}, exitcode.New(exitcode.Integrity, "%s: virtual size is %d bytes after resize, expected %d", path, after.VirtualSize, size)
	}
	return after, nil
}

// scratch is the same-directory temporary file a new disk is written to
// before it is published: Barn creates it empty (never replacing
// anything), records its identity, and has qemu-img write into that
// same file (qemu-img create truncates, keeping the inode).
type scratch struct {
	path string
	id   fileid.ID
}

// newScratch creates the scratch file for dst (0600) and fails when dst
// already exists (conflict, disk_exists).
func newScratch(dst string) (*scratch, error) {
	if _, err := os.Lstat(dst); err == nil {
		return nil, exitcode.New(exitcode.Conflict, "%s already exists; not overwriting it", dst).WithReason("disk_exists")
	} else if !os.IsNotExist(err) {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "checking %s", dst)
	}
	path := filepath.Join(filepath.Dir(dst), fmt.Sprintf(".%s.tmp-%d-%d", filepath.Base(dst), os.Getpid(), time.Now().UnixNano()))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "creating a temporary file beside %s", dst)
	}
	defer f.Close()
	id, err := fileid.OfFile(f)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "recording %s (left in place: its identity is unknown)", path)
	}
	return &scratch{path: path, id: id}, nil
}

// drop removes the scratch file unless it was published, and only while
// it is the file newScratch created (fileid.Remove): a file something
// else put at its name is left alone.
func (s *scratch) drop() { _, _ = s.id.Remove(s.path) }

// publish narrows tmp to 0600 and moves it to dst durably without ever
// replacing an existing dst (safefile.PublishNew).
func publish(tmp, dst string) error {
	if err := safefile.PublishNew(tmp, dst, 0o600); err != nil {
		if errors.Is(err, safefile.ErrExists) {
			return exitcode.New(exitcode.Conflict, "%s already exists; not overwriting it", dst).WithReason("disk_exists")
		}
		return exitcode.Wrap(exitcode.Runtime, err, "publishing %s", dst)
	}
	return nil
}
