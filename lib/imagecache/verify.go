package imagecache

import (
	"errors"
	"fmt"
	"os"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/fileid"
	"barn.dev/lib/imageref"
	"barn.dev/lib/qcow2"
	"barn.dev/lib/safefile"
)

// Measured is what MeasureFile observed about one image file.
type Measured struct {
	SHA256    string       // lower-case hex
	SizeBytes int64        // bytes
	Header    qcow2.Header // from the qcow2 header
	// ID is the lib/fileid identity of the file measured, taken from the
	// descriptor that was read; set also when the measurement failed
	// after the file was opened (zero when it could not be opened).
	ID fileid.ID
}

// MeasureFile hashes the regular file at path (opened without following a
// symlink: safefile.Open) and inspects its qcow2 header. Errors are *exitcode.Error: integrity for
// a symlink, a non-regular file, a header that qcow2.Inspect refuses, or a
// file that changed size while it was read; runtime for I/O errors.
func MeasureFile(path string) (Measured, error) {
	var m Measured
	f, fi, err := safefile.Open(path)
	if errors.Is(err, safefile.ErrNotRegular) {
		return m, exitcode.New(exitcode.Integrity, "%s: a symlink or not a regular file", path).WithReason("unsafe_image_file")
	}
	if err != nil {
		return m, exitcode.Wrap(exitcode.Runtime, err, "reading image")
	}
	defer f.Close()
	return measureOpen(path, f, fi)
}

// measureOpen is MeasureFile of the open regular file f (at path, for
// messages), whose FileInfo before reading is fi.
func measureOpen(path string, f *os.File, fi os.FileInfo) (Measured, error) {
	var m Measured
	var err error
	if m.ID, err = fileid.OfFile(f); err != nil {
		return m, exitcode.Wrap(exitcode.Runtime, err, "reading %s", path)
	}
	m.Header, err = qcow2.Inspect(f)
	if err != nil {
		return m, exitcode.Wrap(exitcode.Integrity, err, "%s", path).WithReason("bad_qcow2_header")
	}
	m.SHA256, m.SizeBytes, err = Digest(f)
	if err != nil {
		return m, exitcode.Wrap(exitcode.Runtime, err, "hashing %s", path)
	}
	after, err := f.Stat()
	if err != nil {
		return m, exitcode.Wrap(exitcode.Runtime, err, "reading image")
	}
	if after.Size() != fi.Size() || after.Size() != m.SizeBytes || !after.ModTime().Equal(fi.ModTime()) {
		return m, exitcode.New(exitcode.Integrity, "%s changed while it was being hashed; retry once nothing writes it", path).WithReason("image_unstable")
	}
	return m, nil
}

// Check compares a measurement with an exact identity: byte count, SHA-256
// and qcow2 virtual size. The error (integrity, reason "image_mismatch")
// names expected and actual values.
func (m Measured) Check(id imageref.Identity, path string) error {
	switch {
	case m.SizeBytes != id.SizeBytes:
		return mismatch(id, path, "size", fmt.Sprint(id.SizeBytes), fmt.Sprint(m.SizeBytes))
	case m.SHA256 != id.SHA256:
		return mismatch(id, path, "sha256", id.SHA256, m.SHA256)
	case id.VirtualSize != 0 && m.Header.VirtualSize != id.VirtualSize:
		return mismatch(id, path, "virtual size", fmt.Sprint(id.VirtualSize), fmt.Sprint(m.Header.VirtualSize))
	}
	return nil
}

func mismatch(id imageref.Identity, path, what, want, got string) error {
	return exitcode.New(exitcode.Integrity, "%s@%s %s: %s mismatch at %s: catalog says %s, file has %s; no other image is used instead",
		id.Image, id.Version, id.Arch, what, path, want, got).WithReason("image_mismatch").
		WithDetail(map[string]string{"image": id.Image, "version": id.Version, "arch": id.Arch, "file": id.File, "field": what, "expected": want, "actual": got})
}
