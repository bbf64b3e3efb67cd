package cli_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"barn.dev/lib/cidata"
	"barn.dev/lib/guest"
	"barn.dev/lib/spec"
	"barn.dev/lib/sshkeys"
	"barn.dev/lib/state"
	"barn.dev/lib/testexec"
	"barn.dev/lib/wire"
)

// sshdBinary returns the OpenSSH server binary, or "" when not installed.
func sshdBinary() string {
	if p, err := exec.LookPath("sshd"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/sshd", "/sbin/sshd"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// freeLoopbackPort returns a TCP port on 127.0.0.1 that was free a moment
// ago.
func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

var (
	sshdsMu sync.Mutex
	sshds   = map[*testscript.TestScript]*exec.Cmd{}
)

// cmdSSHD is `sshd NODE...`: start a real OpenSSH server on 127.0.0.1, one
// fresh loopback port per NODE, standing in for each node's management
// port forward. It authorizes the deployment key
// ($BARN_HOME/keys/id_ed25519.pub, copied to $WORK/.sshd/authorized_keys)
// for the current user, uses a fresh
// Ed25519 host key ($WORK/.sshd/host_key), logs to $WORK/.sshd/sshd.log,
// and rewrites committed state through lib/state: each NODE's ssh_port
// becomes its port, and the deployment's login user becomes the current
// user (the seed refuses root, so apply runs with dba; the spec and node
// hashes are resealed to stay consistent). The server is killed when
// the script ends. `sshd -newkey NODE...` restarts with a new host key (a
// different machine answering on new ports). A second `sshd` replaces the
// first server (list every node it should serve).
//
// `sshd -guest NODE...` also stands in for each guest's setup state: every
// command that reaches NODE's port runs through a ForceCommand that
// replaces the guest's state directory (cidata.StateDir, /var/lib/barn) in
// it with $WORK/guest/NODE, so the readiness probe barn-node really sends
// reads a ready.json or error.json the script writes there, and finds
// $WORK/guest/NODE/bin first on PATH (see guestclock).
func cmdSSHD(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: sshd [-newkey] [-guest] NODE...")
	}
	stopSSHD(ts)
	guestState := false
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "-newkey":
			_ = os.Remove(ts.MkAbs(".sshd/host_key"))
			_ = os.Remove(ts.MkAbs(".sshd/host_key.pub"))
		case "-guest":
			guestState = true
		default:
			ts.Fatalf("sshd: unknown flag %s", args[0])
		}
		args = args[1:]
	}
	bin := sshdBinary()
	if bin == "" {
		ts.Fatalf("sshd is not installed")
	}
	dir := ts.MkAbs(".sshd")
	ts.Check(os.MkdirAll(dir, 0o700))
	hostKey := filepath.Join(dir, "host_key")
	if _, err := os.Stat(hostKey); err != nil {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test-sshd", "-f", hostKey).CombinedOutput(); err != nil {
			ts.Fatalf("ssh-keygen: %v %s", err, out)
		}
	}
	root, err := state.Open(ts.Getenv)
	ts.Check(err)
	pubKey, err := os.ReadFile(sshkeys.Paths(root.KeysDir()).PublicPath)
	if err != nil {
		ts.Fatalf("no deployment public key: %v", err)
	}
	// SHLVL=1 only keeps Debian's bash from sourcing the user's ~/.bashrc
	// for ssh commands (a slow one costs seconds per call); the key is the
	// deployment key as written by barn-node.
	auth := filepath.Join(dir, "authorized_keys")
	ts.Check(os.WriteFile(auth, []byte(`environment="SHLVL=1" `+strings.TrimSpace(string(pubKey))+"\n"), 0o600))
	if os.Geteuid() == 0 {
		_ = os.MkdirAll("/run/sshd", 0o755) // privilege separation directory
	}
	var conf strings.Builder
	ports := map[string]int{}
	for _, n := range args {
		p, err := freeLoopbackPort()
		ts.Check(err)
		ports[n] = p
		fmt.Fprintf(&conf, "ListenAddress 127.0.0.1:%d\n", p)
	}
	fmt.Fprintf(&conf, "HostKey %s\nAuthorizedKeysFile %s\nPermitUserEnvironment SHLVL\nPidFile none\nStrictModes no\nUsePAM no\n", hostKey, auth)
	conf.WriteString("PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nSubsystem sftp internal-sftp\nMaxStartups 50\nPerSourcePenalties no\n")
	if guestState {
		// Match blocks come last: everything after a Match belongs to it.
		for _, n := range args {
			gdir := ts.MkAbs(filepath.Join("guest", n))
			ts.Check(os.MkdirAll(gdir, 0o755))
			wrapper := filepath.Join(dir, "guest-"+n+".sh")
			script := "#!/bin/sh\nPATH=" + gdir + "/bin:$PATH; export PATH\nexec sh -c \"$(printf '%s' \"$SSH_ORIGINAL_COMMAND\" | sed 's|" + cidata.StateDir + "/|" + gdir + "/|g')\"\n"
			ts.Check(testexec.WriteScript(wrapper, []byte(script)))
			fmt.Fprintf(&conf, "Match LocalPort %d\n  ForceCommand %s\n", ports[n], wrapper)
		}
	}
	cfg := filepath.Join(dir, "sshd_config")
	ts.Check(os.WriteFile(cfg, []byte(conf.String()), 0o600))
	if out, err := exec.Command(bin, "-t", "-f", cfg).CombinedOutput(); err != nil {
		// PerSourcePenalties is OpenSSH ≥9.8; older servers refuse it
		s := strings.Replace(conf.String(), "PerSourcePenalties no\n", "", 1)
		ts.Check(os.WriteFile(cfg, []byte(s), 0o600))
		if out2, err := exec.Command(bin, "-t", "-f", cfg).CombinedOutput(); err != nil {
			ts.Fatalf("sshd -t: %v\n%s\n%s", err, out, out2)
		}
	}
	logf, err := os.OpenFile(filepath.Join(dir, "sshd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	ts.Check(err)
	cmd := exec.Command(bin, "-D", "-e", "-f", cfg)
	cmd.Stdout, cmd.Stderr = logf, logf
	ts.Check(cmd.Start())
	loginAsCurrentUser(ts, root)
	sshdsMu.Lock()
	sshds[ts] = cmd
	sshdsMu.Unlock()
	ts.Defer(func() { stopSSHD(ts); logf.Close() })
	for n, p := range ports {
		ok := false
		for deadline := time.Now().Add(time.Minute); !ok && time.Now().Before(deadline); {
			c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(p), 100*time.Millisecond)
			if err == nil {
				c.Close()
				ok = true
			} else {
				time.Sleep(50 * time.Millisecond)
			}
		}
		if !ok {
			log, _ := os.ReadFile(filepath.Join(dir, "sshd.log"))
			ts.Fatalf("sshd did not listen on %d:\n%s", p, log)
		}
		st, err := root.ReadNode(n)
		ts.Check(err)
		if st == nil {
			ts.Fatalf("sshd: no committed node %s", n)
		}
		st.SSHPort = p
		ts.Check(root.WriteNode(st))
		ts.Logf("sshd: node %s on 127.0.0.1:%d", n, p)
	}
}

// loginAsCurrentUser rewrites the committed deployment (and every node's
// spec copy and hash) so the login user is the current user.
func loginAsCurrentUser(ts *testscript.TestScript, root *state.Root) {
	u, err := user.Current()
	ts.Check(err)
	dep, err := root.ReadDeployment()
	ts.Check(err)
	if dep == nil {
		ts.Fatalf("sshd: no committed deployment")
	}
	if dep.Spec.Deployment.User.Name == u.Username {
		return
	}
	uid, _ := strconv.Atoi(u.Uid)
	dep.Spec.Deployment.User = spec.User{Name: u.Username, UID: uid}
	dep.Spec.Seal()
	dep.SpecHash = dep.Spec.SpecHash
	ts.Check(root.WriteDeployment(dep))
	names, err := root.NodeNames()
	ts.Check(err)
	for _, n := range names {
		st, err := root.ReadNode(n)
		ts.Check(err)
		if st == nil {
			continue
		}
		if sn := dep.Spec.Node(n); sn != nil {
			st.Spec, st.SpecHash = *sn, sn.SpecHash
			ts.Check(root.WriteNode(st))
		}
	}
}

func stopSSHD(ts *testscript.TestScript) {
	sshdsMu.Lock()
	cmd := sshds[ts]
	delete(sshds, ts)
	sshdsMu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
	}
}

// cmdSSHPort is `sshport NODE [VAR]`: print NODE's committed ssh_port
// and, with VAR, also set $VAR to it.
func cmdSSHPort(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: sshport NODE [VAR]")
	}
	root, err := state.Open(ts.Getenv)
	ts.Check(err)
	st, err := root.ReadNode(args[0])
	ts.Check(err)
	if st == nil {
		ts.Fatalf("no node %s", args[0])
	}
	fmt.Fprintf(ts.Stdout(), "%d\n", st.SSHPort)
	if len(args) == 2 {
		ts.Setenv(args[1], strconv.Itoa(st.SSHPort))
	}
}

// cmdEvent is `event NODE ACTION MESSAGE...`: append one barn.event/v1
// record to $BARN_HOME/events.jsonl through lib/state.
func cmdEvent(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 3 {
		ts.Fatalf("usage: event NODE ACTION MESSAGE...")
	}
	root, err := state.Open(ts.Getenv)
	ts.Check(err)
	ts.Check(root.AppendEvent(state.Event{Node: args[0], Action: args[1], Phase: "done", OperationID: "op-test-0001", Message: strings.Join(args[2:], " ")}))
}

// cmdGuestReady is `guestready NODE`: write the ready marker NODE's guest
// writes when its setup finished ($WORK/guest/NODE/ready.json, read through
// `sshd -guest`), for NODE's committed generation and node spec hash.
func cmdGuestReady(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: guestready NODE")
	}
	root, err := state.Open(ts.Getenv)
	ts.Check(err)
	n, err := root.ReadNode(args[0])
	ts.Check(err)
	if n == nil {
		ts.Fatalf("guestready: no committed node %s", args[0])
	}
	m := guest.Marker{Node: n.Node, Generation: n.Generation, SpecHash: n.SpecHash, SetupVersion: cidata.SetupVersion,
		Warnings: []guest.Warning{}, Repairs: []string{}, Disks: []guest.Disk{}}
	b, err := wire.Marshal(m)
	ts.Check(err)
	dir := ts.MkAbs(filepath.Join("guest", args[0]))
	ts.Check(os.MkdirAll(dir, 0o755))
	ts.Check(os.WriteFile(filepath.Join(dir, "ready.json"), b, 0o644))
}

// guestDate is the fake guest's date: the host's clock plus the offset in
// ../clock_offset (seconds), for `date +%s.%N`; `date -s "S seconds"`
// (SetClock's relative step) adds S to that offset. Any other use fails,
// so a guest command this harness does not model cannot reach the host's
// own clock.
const guestDate = `#!/bin/sh
d=$(dirname "$0")/..
off=$(cat "$d/clock_offset")
host=$(command -p date +%s.%N)
case "$*" in
"+%s.%N") awk -v h="$host" -v o="$off" 'BEGIN { printf "%.9f\n", h + o }' ;;
"-s "*" seconds") awk -v s="${2% seconds}" -v o="$off" 'BEGIN { printf "%.9f\n", o + s }' >"$d/clock_offset" ;;
*) echo "fake guest date: unsupported: $*" >&2; exit 1 ;;
esac
`

// guestSudo is the fake guest's passwordless sudo -n: it runs the command
// with the guest's PATH (the fake date), never the host's sudo.
const guestSudo = `#!/bin/sh
[ "$1" = -n ] && shift
exec "$@"
`

// cmdGuestClock is `guestclock NODE OFFSET`: NODE's guest clock (through
// `sshd -guest`) runs OFFSET seconds (a decimal, negative: behind) from
// the host's: a fake date and sudo in $WORK/guest/NODE/bin, so time status
// measures the offset and time sync moves it, without the host's clock.
func cmdGuestClock(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: guestclock NODE OFFSET")
	}
	if _, err := strconv.ParseFloat(args[1], 64); err != nil {
		ts.Fatalf("guestclock: offset %q is not a number", args[1])
	}
	dir := ts.MkAbs(filepath.Join("guest", args[0]))
	ts.Check(os.MkdirAll(filepath.Join(dir, "bin"), 0o755))
	ts.Check(testexec.WriteScript(filepath.Join(dir, "bin", "date"), []byte(guestDate)))
	ts.Check(testexec.WriteScript(filepath.Join(dir, "bin", "sudo"), []byte(guestSudo)))
	ts.Check(os.WriteFile(filepath.Join(dir, "clock_offset"), []byte(args[1]+"\n"), 0o644))
}
