// Package qcow2 inspects qcow2 image headers in process, without qemu-img,
// and refuses every header feature a read-only Barn base image must not
// have.
//
// Format: QEMU docs/interop/qcow2.txt ("Header" and "Header extensions").
// All integers are big-endian. Version 2 headers are 72 bytes; version 3
// headers are at least 104 bytes and carry the feature bitmaps.
//
// Inspect accepts an image only when it is a self-contained base: no backing
// file, no external data file, not encrypted, neither dirty nor marked
// corrupt, no extended L2 entries, and no incompatible feature bit this
// package does not know. The compression-type bit is accepted with a known
// compression type (zlib or zstd).
package qcow2

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Magic is the first four bytes of every qcow2 file: "QFI\xfb".
var Magic = [4]byte{'Q', 'F', 'I', 0xfb}

// Incompatible feature bits (header bytes 72–79, version 3).
const (
	IncompatDirty          = 1 << 0
	IncompatCorrupt        = 1 << 1
	IncompatDataFile       = 1 << 2
	IncompatCompressionTyp = 1 << 3
	IncompatExtendedL2     = 1 << 4
	incompatKnown          = IncompatDirty | IncompatCorrupt | IncompatDataFile | IncompatCompressionTyp | IncompatExtendedL2
)

// Header extension types (docs/interop/qcow2.txt "Header extensions").
const (
	extEnd            = 0x00000000
	extBackingFormat  = 0xe2792aca
	extFeatureNames   = 0x6803f857
	extBitmaps        = 0x23852875
	extEncryption     = 0x0537be77
	extDataFile       = 0x44415441
	maxExtensionBytes = 1 << 20 // bound on the extension area we walk
)

// Sentinel errors; Inspect wraps exactly one of them so callers can branch
// with errors.Is. Every one is an integrity failure for a base image.
var (
	ErrNotQcow2     = errors.New("not a qcow2 image")
	ErrTruncated    = errors.New("qcow2 header is truncated")
	ErrVersion      = errors.New("unsupported qcow2 version")
	ErrMalformed    = errors.New("malformed qcow2 header")
	ErrBackingFile  = errors.New("qcow2 image has a backing file")
	ErrDataFile     = errors.New("qcow2 image uses an external data file")
	ErrEncrypted    = errors.New("qcow2 image is encrypted")
	ErrCorrupt      = errors.New("qcow2 image is marked corrupt")
	ErrDirty        = errors.New("qcow2 image is marked dirty")
	ErrExtendedL2   = errors.New("qcow2 image uses extended L2 entries")
	ErrIncompatible = errors.New("qcow2 image has unknown incompatible features")
)

// Header is what Inspect reports about an accepted image.
type Header struct {
	Version              int    `json:"version"`      // 2 or 3
	VirtualSize          int64  `json:"virtual_size"` // guest-visible disk size, bytes
	ClusterBits          int    `json:"cluster_bits"` // 9..21
	ClusterSize          int64  `json:"cluster_size"` // bytes, 1<<ClusterBits
	HeaderLength         int    `json:"header_length"`
	RefcountOrder        int    `json:"refcount_order"` // refcount width is 1<<RefcountOrder bits
	CompressionType      string `json:"compression_type"`
	IncompatibleFeatures uint64 `json:"incompatible_features"`
	CompatibleFeatures   uint64 `json:"compatible_features"`
	AutoclearFeatures    uint64 `json:"autoclear_features"`
	Snapshots            int    `json:"snapshots"`
}

// MaxVirtualSize bounds the virtual size Inspect accepts, bytes (1 PiB, a
// sanity bound far above any lab image).
const MaxVirtualSize = int64(1) << 50

// Inspect reads the header (and header extensions) of the qcow2 image in r
// and returns it, or an error wrapping one of the sentinels above with the
// offending value. It reads at most about 1 MiB.
func Inspect(r io.ReaderAt) (Header, error) {
	var h Header
	buf := make([]byte, 112)
	n, err := r.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return h, fmt.Errorf("reading qcow2 header: %w", err)
	}
	buf = buf[:n]
	if n < 4 || [4]byte(buf[:4]) != Magic {
		return h, fmt.Errorf("%w: first bytes are not QFI\\xfb", ErrNotQcow2)
	}
	if n < 72 {
		return h, fmt.Errorf("%w: %d bytes, need at least 72", ErrTruncated, n)
	}
	be := binary.BigEndian
	version := be.Uint32(buf[4:])
	if version != 2 && version != 3 {
		return h, fmt.Errorf("%w: version %d (want 2 or 3)", ErrVersion, version)
	}
	h.Version = int(version)
	backingOffset := be.Uint64(buf[8:])
	backingSize := be.Uint32(buf[16:])
	clusterBits := be.Uint32(buf[20:])
	size := be.Uint64(buf[24:])
	cryptMethod := be.Uint32(buf[32:])
	h.Snapshots = int(be.Uint32(buf[60:]) & 0x7fffffff)

	if clusterBits < 9 || clusterBits > 21 {
		return h, fmt.Errorf("%w: cluster_bits %d outside 9..21", ErrMalformed, clusterBits)
	}
	h.ClusterBits = int(clusterBits)
	h.ClusterSize = int64(1) << clusterBits
	if size == 0 || size > uint64(MaxVirtualSize) {
		return h, fmt.Errorf("%w: virtual size %d bytes outside 1..%d", ErrMalformed, size, MaxVirtualSize)
	}
	h.VirtualSize = int64(size)

	h.HeaderLength, h.RefcountOrder, h.CompressionType = 72, 4, "zlib"
	if version == 3 {
		if err := readV3(buf, &h); err != nil {
			return h, err
		}
	}
	if err := refuseFeatures(&h, backingOffset, backingSize, cryptMethod); err != nil {
		return h, err
	}
	if err := walkExtensions(r, int64(h.HeaderLength)); err != nil {
		return h, err
	}
	return h, nil
}

// readV3 reads the version 3 fields of header buf into h.
func readV3(buf []byte, h *Header) error {
	be := binary.BigEndian
	n := len(buf)
	if n < 104 {
		return fmt.Errorf("%w: version 3 header has %d bytes, need 104", ErrTruncated, n)
	}
	h.IncompatibleFeatures = be.Uint64(buf[72:])
	h.CompatibleFeatures = be.Uint64(buf[80:])
	h.AutoclearFeatures = be.Uint64(buf[88:])
	h.RefcountOrder = int(be.Uint32(buf[96:]))
	hl := be.Uint32(buf[100:])
	if hl < 104 || hl%8 != 0 || hl > uint32(h.ClusterSize) {
		return fmt.Errorf("%w: header_length %d (want a multiple of 8, 104..cluster size)", ErrMalformed, hl)
	}
	h.HeaderLength = int(hl)
	if h.RefcountOrder > 6 {
		return fmt.Errorf("%w: refcount_order %d (max 6)", ErrMalformed, h.RefcountOrder)
	}
	if hl > 104 {
		if n < 105 {
			return fmt.Errorf("%w: header_length %d but file ends at %d", ErrTruncated, hl, n)
		}
		switch buf[104] {
		case 0:
			h.CompressionType = "zlib"
		case 1:
			h.CompressionType = "zstd"
		default:
			return fmt.Errorf("%w: unknown compression type %d", ErrIncompatible, buf[104])
		}
	}
	return nil
}

// refuseFeatures refuses what a base image may not use: a backing file,
// encryption, the corrupt, data-file, dirty or extended-L2 bits, unknown
// incompatible bits, and a compression-type bit without its field.
func refuseFeatures(h *Header, backingOffset uint64, backingSize, cryptMethod uint32) error {
	inc := h.IncompatibleFeatures
	switch {
	case backingOffset != 0 || backingSize != 0:
		return fmt.Errorf("%w (backing_file_offset %d, size %d); a base image must be self-contained", ErrBackingFile, backingOffset, backingSize)
	case cryptMethod != 0:
		return fmt.Errorf("%w (crypt_method %d)", ErrEncrypted, cryptMethod)
	case inc&IncompatCorrupt != 0:
		return fmt.Errorf("%w (incompatible bit 1); repair with qemu-img check -r all on a copy", ErrCorrupt)
	case inc&IncompatDataFile != 0:
		return fmt.Errorf("%w (incompatible bit 2)", ErrDataFile)
	case inc&^incompatKnown != 0:
		return fmt.Errorf("%w: bits %#x", ErrIncompatible, inc&^incompatKnown)
	case inc&IncompatDirty != 0:
		return fmt.Errorf("%w (incompatible bit 0): it was not closed cleanly", ErrDirty)
	case inc&IncompatExtendedL2 != 0:
		return fmt.Errorf("%w (incompatible bit 4)", ErrExtendedL2)
	case inc&IncompatCompressionTyp != 0 && h.HeaderLength <= 104:
		return fmt.Errorf("%w: compression-type bit set without a compression_type field", ErrMalformed)
	}
	return nil
}

// walkExtensions reads the header extensions starting at off and refuses a
// full-disk-encryption pointer or an external data file name. Unknown
// extension types are skipped (the spec says they may be ignored).
func walkExtensions(r io.ReaderAt, off int64) error {
	end := off + maxExtensionBytes
	var hdr [8]byte
	for off < end {
		n, err := r.ReadAt(hdr[:], off)
		if n < 8 {
			if n == 0 && errors.Is(err, io.EOF) {
				return nil // a header with no extension area at all (tiny crafted files)
			}
			return fmt.Errorf("%w: header extension at offset %d is cut short", ErrTruncated, off)
		}
		typ := binary.BigEndian.Uint32(hdr[:4])
		length := int64(binary.BigEndian.Uint32(hdr[4:]))
		switch typ {
		case extEnd:
			return nil
		case extEncryption:
			return fmt.Errorf("%w (full disk encryption header extension)", ErrEncrypted)
		case extDataFile:
			return fmt.Errorf("%w (data file name extension)", ErrDataFile)
		}
		off += 8 + (length+7)&^7
	}
	return fmt.Errorf("%w: header extensions run past %d bytes without an end marker", ErrMalformed, int64(maxExtensionBytes))
}
