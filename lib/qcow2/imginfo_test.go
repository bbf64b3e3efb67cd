package qcow2

// The qemu-img info view is the tests' oracle: Inspect's verdicts are
// cross-checked against what qemu-img itself reports.

import (
	"context"
	"encoding/json"
	"fmt"
)

// ImgInfo is the part of `qemu-img info --output=json` Barn cross-checks.
type ImgInfo struct {
	Format          string `json:"format"`
	VirtualSize     int64  `json:"virtual-size"`
	BackingFilename string `json:"backing-filename"`
	Encrypted       bool   `json:"encrypted"`
	DirtyFlag       bool   `json:"dirty-flag"`
	FormatSpecific  struct {
		Type string `json:"type"`
		Data struct {
			Compat     string `json:"compat"`
			Corrupt    bool   `json:"corrupt"`
			ExtendedL2 bool   `json:"extended-l2"`
			DataFile   string `json:"data-file"`
		} `json:"data"`
	} `json:"format-specific"`
}

// ParseInfo decodes `qemu-img info --output=json` output.
func ParseInfo(out []byte) (ImgInfo, error) {
	var i ImgInfo
	if err := json.Unmarshal(out, &i); err != nil {
		return i, fmt.Errorf("parsing qemu-img info output: %w", err)
	}
	return i, nil
}

// Validate applies the base-image rules to a qemu-img info result: format
// qcow2, virtual size > 0, no backing file, no data file, not encrypted,
// not corrupt, not dirty, no extended L2. It wraps the same sentinels as
// Inspect.
func (i ImgInfo) Validate() error {
	switch {
	case i.Format != "qcow2":
		return fmt.Errorf("%w: qemu-img reports format %q", ErrNotQcow2, i.Format)
	case i.VirtualSize <= 0:
		return fmt.Errorf("%w: qemu-img reports virtual size %d", ErrMalformed, i.VirtualSize)
	case i.BackingFilename != "":
		return fmt.Errorf("%w (%s)", ErrBackingFile, i.BackingFilename)
	case i.FormatSpecific.Data.DataFile != "":
		return fmt.Errorf("%w (%s)", ErrDataFile, i.FormatSpecific.Data.DataFile)
	case i.Encrypted:
		return ErrEncrypted
	case i.FormatSpecific.Data.Corrupt:
		return ErrCorrupt
	case i.DirtyFlag:
		return ErrDirty
	case i.FormatSpecific.Data.ExtendedL2:
		return ErrExtendedL2
	}
	return nil
}

// Info runs `qemu-img info --output=json -f qcow2 --force-share path`.
func Info(ctx context.Context, path string) (ImgInfo, error) {
	out, err := runQemuImg(ctx, "info", "--output=json", "-f", "qcow2", "--force-share", path)
	if err != nil {
		return ImgInfo{}, err
	}
	return ParseInfo(out)
}
