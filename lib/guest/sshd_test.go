package guest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"barn.dev/lib/internal/testport"
	"barn.dev/lib/sshkeys"
)

// sshd is a real OpenSSH server on a loopback port, standing in for a
// guest's management port forward.
type sshd struct {
	t       testing.TB
	dir     string
	port    int
	cmd     *exec.Cmd
	keys    sshkeys.KeyPair
	user    string
	hostKey string
}

// startSSHD starts sshd on 127.0.0.1 accepting the deployment key of a
// fresh keys dir for the current user. It skips (saying why) when sshd is
// not installed.
func startSSHD(t testing.TB) *sshd { t.Helper(); return startSSHDKeysAt(t, "keys") }

// startSSHDKeysAt is startSSHD with the deployment keys in the directory
// keysDir (relative to the server's temporary directory).
func startSSHDKeysAt(t testing.TB, keysDir string) *sshd {
	t.Helper()
	bin, err := exec.LookPath("sshd")
	if err != nil {
		for _, p := range []string{"/usr/sbin/sshd", "/sbin/sshd"} {
			if _, e := os.Stat(p); e == nil {
				bin = p
			}
		}
	}
	if bin == "" {
		t.Skip("openssh-server (sshd) not installed: cannot test against a real SSH server")
	}
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("ssh client not installed")
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keys, err := sshkeys.Ensure(filepath.Join(dir, keysDir), false)
	if err != nil {
		t.Fatal(err)
	}
	auth := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(auth, []byte(keys.Public+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		_ = os.MkdirAll("/run/sshd", 0o755) // privilege separation directory
	}
	s := &sshd{t: t, dir: dir, keys: keys, user: u.Username, port: testport.Free(t)}
	s.start(bin, auth)
	t.Cleanup(s.stop)
	return s
}

// start (re)starts sshd with a new host key on the same port.
func (s *sshd) start(bin, auth string) {
	t := s.t
	s.hostKey = filepath.Join(s.dir, fmt.Sprintf("host_%d", time.Now().UnixNano()))
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", s.hostKey).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	cfg := filepath.Join(s.dir, "sshd_config")
	conf := fmt.Sprintf("Port %d\nListenAddress 127.0.0.1\nHostKey %s\nAuthorizedKeysFile %s\nPidFile none\nStrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nSubsystem sftp internal-sftp\n",
		s.port, s.hostKey, auth)
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	s.cmd = exec.Command(bin, "-D", "-e", "-f", cfg)
	s.cmd.Stderr = &errb
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start sshd: %v", err)
	}
	// Bounded by a deadline, not a count: sshd starts slowly on a loaded machine.
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(s.port), 100*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("sshd did not listen on %d: %s", s.port, errb.String())
}

func (s *sshd) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_, _ = s.cmd.Process.Wait()
		s.cmd = nil
	}
}

// restartWithNewHostKey simulates a different machine answering on the
// same port.
func (s *sshd) restartWithNewHostKey() {
	s.stop()
	bin, _ := exec.LookPath("sshd")
	if bin == "" {
		bin = "/usr/sbin/sshd"
	}
	s.start(bin, filepath.Join(s.dir, "authorized_keys"))
}

func (s *sshd) target(uuid string) Target {
	return Target{Node: "meta", Port: s.port, User: s.user, Keys: s.keys, VMUUID: uuid, Generation: 1, SpecHash: "abc"}
}

func run(t *testing.T, argv []string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code, err := Run(ctx, argv, Streams{Out: &out, Err: &errb})
	if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

func execArgv(t *testing.T, tg Target, argv []string) []string {
	t.Helper()
	a, err := ExecArgv(tg, argv)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func shellArgv(t *testing.T, tg Target, cmd []string, tty bool) []string {
	t.Helper()
	a, err := ShellArgv(tg, cmd, tty)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
