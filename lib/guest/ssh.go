// Package guest reaches a running Barn guest over management SSH: the ssh
// argv (one place builds it), readiness, stage re-runs, exec with
// preserved argument boundaries, the ~/.ssh/config integration and the
// Ansible connection export.
//
// Every ssh invocation reads no ssh_config (-F /dev/null) and uses only the
// deployment key and Barn's own known_hosts under the VM instance's
// HostKeyAlias (barn-reference-behaviour.md §3.11):
//
//	ssh -F /dev/null -o IdentityFile=KEY -o BatchMode=yes -o IdentitiesOnly=yes
//	    -o StrictHostKeyChecking=accept-new -o LogLevel=ERROR
//	    -o UserKnownHostsFile=KNOWN -o GlobalKnownHostsFile=none
//	    -o ConnectTimeout=30 -o HostKeyAlias=barn-<sha256(uuid)>
//	    -p PORT USER@127.0.0.1
//
// (-F /dev/null skips /etc/ssh/ssh_config too, but not the system-wide
// known_hosts files, hence GlobalKnownHostsFile=none: only Barn's
// known_hosts decides which host key a guest may have.)
//
// KEY and KNOWN are written with quote.SSHPath: ssh reads each -o value as
// an ssh_config line and %-expands both file names (so does -i, which is
// therefore not used).
package guest

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/quote"
	"barn.dev/lib/sshkeys"
)

// ConnectTimeout bounds an ssh connection's TCP connect and its banner
// exchange (OpenSSH applies ConnectTimeout to both). QEMU's port forward
// accepts at once, so the wait is for the guest's sshd to fork and send
// its banner, which a TCG guest does slowly: an emulated arm64 guest
// beside another, just ready, missed 5 s ("Connection timed out during
// banner exchange", the live arm64 lab, 2026-12-03). A guest that is not
// listening is refused through the forward at once, so only a slow or
// paused guest waits this long.
const ConnectTimeout = 30 * time.Second

// Target is one guest reachable over management SSH.
type Target struct {
	Node       string
	Host       string // "" means 127.0.0.1 (the management port forward)
	Port       int    // management SSH port on Host
	User       string // the login user
	Keys       sshkeys.KeyPair
	VMUUID     string // instance identity: selects the HostKeyAlias
	Generation int64  // expected in the ready marker
	SpecHash   string // node hash expected in the ready marker
	// SSH is the ssh client binary; "" means "ssh" from PATH.
	SSH string
}

func (t Target) host() string {
	if t.Host == "" {
		return "127.0.0.1"
	}
	return t.Host
}

func (t Target) binary() string {
	if t.SSH == "" {
		return "ssh"
	}
	return t.SSH
}

// Options returns the ssh -o options of every Barn connection to t,
// without -F/-p/destination. A key or known_hosts path that ssh_config
// cannot carry is a usage error (quote.SSHPath).
func (t Target) Options() ([]string, error) {
	key, err := quote.SSHPath(t.Keys.PrivatePath)
	if err != nil {
		return nil, err
	}
	known, err := quote.SSHPath(t.Keys.KnownHosts)
	if err != nil {
		return nil, err
	}
	return []string{
		"IdentityFile=" + key,
		"BatchMode=yes",
		"IdentitiesOnly=yes",
		"StrictHostKeyChecking=accept-new",
		"LogLevel=ERROR",
		"UserKnownHostsFile=" + known,
		"GlobalKnownHostsFile=none",
		"ConnectTimeout=" + strconv.Itoa(int(ConnectTimeout/time.Second)),
		"HostKeyAlias=" + sshkeys.HostKeyAlias(t.VMUUID),
	}, nil
}

// Args returns the ssh arguments (without the binary) up to and including
// the destination. tty adds -t (interactive sessions).
func (t Target) Args(tty bool) ([]string, error) {
	opts, err := t.Options()
	if err != nil {
		return nil, err
	}
	a := []string{"-F", "/dev/null"}
	for _, o := range opts {
		a = append(a, "-o", o)
	}
	if tty {
		a = append(a, "-t")
	}
	return append(a, "-p", strconv.Itoa(t.Port), t.User+"@"+t.host()), nil
}

// RemoteCommand joins argv into one remote shell command line that the
// guest's login shell splits back into exactly argv.
func RemoteCommand(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = quote.Shell(a)
	}
	return strings.Join(q, " ")
}

// ExecArgv is the full argv (binary first) running argv on t with argument
// boundaries preserved. Errors as Options.
func ExecArgv(t Target, argv []string) ([]string, error) {
	a, err := t.Args(false)
	if err != nil {
		return nil, err
	}
	return append(append([]string{t.binary()}, a...), "--", RemoteCommand(argv)), nil
}

// ShellArgv is the full argv of `ssh NODE [-- CMD...]`: with no command an
// interactive login (tty); with a command, its words joined by spaces and
// interpreted by the remote shell (like ssh itself).
func ShellArgv(t Target, cmd []string, tty bool) ([]string, error) {
	args, err := t.Args(tty || len(cmd) == 0)
	if err != nil {
		return nil, err
	}
	a := append([]string{t.binary()}, args...)
	if len(cmd) > 0 {
		a = append(a, "--", strings.Join(cmd, " "))
	}
	return a, nil
}

// Streams are the standard streams of a remote command.
type Streams struct {
	In       io.Reader
	Out, Err io.Writer
}

// Run runs argv (from ExecArgv or ShellArgv) and returns its exit status
// unchanged — the remote command's status, or 255 for ssh's own failures.
// err is non-nil only when ssh could not be started at all (capability
// error reason "ssh_missing") or ctx ended (cancelled).
func Run(ctx context.Context, argv []string, s Streams) (int, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s.In, s.Out, s.Err
	err := cmd.Run()
	if ctx.Err() != nil {
		return 130, exitcode.Wrap(exitcode.Cancelled, ctx.Err(), "cancelled")
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ee):
		return ee.ExitCode(), nil
	case errors.Is(err, exec.ErrNotFound):
		return 0, exitcode.New(exitcode.Capability, "the OpenSSH client %q is not installed", argv[0]).
			WithReason("ssh_missing").WithNext("apt-get install openssh-client")
	default:
		return 0, exitcode.Wrap(exitcode.Runtime, err, "run %s", argv[0])
	}
}

// permanentSSH are ssh stderr fragments that no amount of waiting fixes.
var permanentSSH = []struct{ frag, reason string }{
	{"host key verification failed", "host_key_mismatch"},
	{"remote host identification has changed", "host_key_mismatch"},
	{"permission denied (", "ssh_auth_failed"},
	{"bad configuration option", "ssh_config_invalid"},
	{"bad permissions", "ssh_key_permissions"},
	{"unprotected private key", "ssh_key_permissions"},
	{"no matching host key type", "ssh_host_key_type"},
}

// PermanentSSHError returns the reason when stderr of a failed ssh run
// shows a failure that waiting cannot fix, else "".
func PermanentSSHError(stderr string) string {
	l := strings.ToLower(stderr)
	for _, p := range permanentSSH {
		if strings.Contains(l, p.frag) {
			return p.reason
		}
	}
	return ""
}

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
