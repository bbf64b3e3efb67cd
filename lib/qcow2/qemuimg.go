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

// ImgCheck is the part of `qemu-img check --output=json` Barn requires.
type ImgCheck struct {
	Format      string `json:"format"`
	CheckErrors int    `json:"check-errors"`
	Corruptions int    `json:"corruptions"`
	Leaks       int    `json:"leaks"`
}

// ParseCheck decodes `qemu-img check --output=json` output.
func ParseCheck(out []byte) (ImgCheck, error) {
	var c ImgCheck
	if err := json.Unmarshal(out, &c); err != nil {
		return c, fmt.Errorf("parsing qemu-img check output: %w", err)
	}
	return c, nil
}

// ErrNoQemuImg is returned by Check when qemu-img is not installed.
var ErrNoQemuImg = errors.New("qemu-img is not installed")

// qemuImgTimeout bounds one qemu-img run (check reads every cluster table).
const qemuImgTimeout = 5 * time.Minute

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
