package qcow2

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"time"
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

// ImgCheck is the part of `qemu-img check --output=json` Barn requires.
type ImgCheck struct {
	Format      string `json:"format"`
	CheckErrors int    `json:"check-errors"`
	Corruptions int    `json:"corruptions"`
	Leaks       int    `json:"leaks"`
}

// ParseInfo decodes `qemu-img info --output=json` output.
func ParseInfo(out []byte) (ImgInfo, error) {
	var i ImgInfo
	if err := json.Unmarshal(out, &i); err != nil {
		return i, fmt.Errorf("parsing qemu-img info output: %w", err)
	}
	return i, nil
}

// ParseCheck decodes `qemu-img check --output=json` output.
func ParseCheck(out []byte) (ImgCheck, error) {
	var c ImgCheck
	if err := json.Unmarshal(out, &c); err != nil {
		return c, fmt.Errorf("parsing qemu-img check output: %w", err)
	}
	return c, nil
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

// ErrNoQemuImg is returned by Info and Check when qemu-img is not installed.
var ErrNoQemuImg = errors.New("qemu-img is not installed")

// qemuImgTimeout bounds one qemu-img run (check reads every cluster table).
const qemuImgTimeout = 5 * time.Minute

// Info runs `qemu-img info --output=json -f qcow2 --force-share path`.
func Info(ctx context.Context, path string) (ImgInfo, error) {
	out, err := runQemuImg(ctx, "info", "--output=json", "-f", "qcow2", "--force-share", path)
	if err != nil {
		return ImgInfo{}, err
	}
	return ParseInfo(out)
}

// Check runs `qemu-img check --output=json -f qcow2 --force-share path` and
// returns an error wrapping ErrCorrupt when it reports check errors or
// corruptions. qemu-img exits 2 on corruptions and 3 on leaks; the JSON is
// parsed either way.
func Check(ctx context.Context, path string) (ImgCheck, error) {
	out, err := runQemuImg(ctx, "check", "--output=json", "-f", "qcow2", "--force-share", path)
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && len(out) > 0) {
		return ImgCheck{}, err
	}
	c, perr := ParseCheck(out)
	if perr != nil {
		return c, perr
	}
	if c.CheckErrors != 0 || c.Corruptions != 0 {
		return c, fmt.Errorf("%w: qemu-img check reports %d check errors, %d corruptions", ErrCorrupt, c.CheckErrors, c.Corruptions)
	}
	return c, nil
}

func runQemuImg(ctx context.Context, args ...string) ([]byte, error) {
	bin, err := exec.LookPath("qemu-img")
	if err != nil {
		return nil, ErrNoQemuImg
	}
	ctx, cancel := context.WithTimeout(ctx, qemuImgTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("qemu-img %s: %w: %s", args[0], err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}
