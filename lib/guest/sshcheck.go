package guest

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"barn.dev/lib/exitcode"
)

// sshCheckTimeout bounds the one `ssh -G` run of CheckFragmentParses.
const sshCheckTimeout = 10 * time.Second

// CheckFragmentParses has the local OpenSSH client (sshBin; "" means ssh
// from PATH) parse fragment on its own (`ssh -G -F FILE HOST`: the whole
// file is parsed, every Host block included, and nothing is connected).
// ssh refuses a whole config over one keyword it does not know (an
// OpenSSH older than 8.7 has no SessionType, StdinNull or
// ForkAfterAuthentication), and once the fragment is Included at the top
// of ~/.ssh/config that would break every ssh command, Barn's or not. So
// a refusal is a capability error, reason "ssh_config_unsupported",
// carrying ssh's own message, and Install must not run. No ssh client
// installed returns nil: nothing would read the file.
func CheckFragmentParses(ctx context.Context, sshBin string, fragment []byte) error {
	if sshBin == "" {
		sshBin = "ssh"
	}
	path, err := exec.LookPath(sshBin)
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return exitcode.Wrap(exitcode.Capability, err, "finding the ssh client %s", sshBin)
	}
	dir, err := os.MkdirTemp("", "barn-ssh-check-")
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "checking the ssh-config fragment")
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "fragment")
	if err := os.WriteFile(file, fragment, 0o600); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "checking the ssh-config fragment")
	}
	ctx, cancel := context.WithTimeout(ctx, sshCheckTimeout)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, "-G", "-F", file, "barn-fragment-check.invalid")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, nil, &stderr
	if err := cmd.Run(); err != nil {
		return exitcode.New(exitcode.Capability, "%s refuses Barn's ssh-config fragment (%v): %s; not installing it, since an Include ssh cannot parse would break every ssh command",
			path, err, strings.TrimSpace(stderr.String())).
			WithReason("ssh_config_unsupported").
			WithNext("barn-node ssh NODE   # needs no ssh_config; or install OpenSSH 8.7 or newer")
	}
	return nil
}
