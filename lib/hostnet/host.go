package hostnet

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
)

// DefaultBridge is the bridge name used when BARN_BRIDGE is unset.
const DefaultBridge = "barn0"

// DefaultCIDR is the deployment subnet used when none is given.
const DefaultCIDR = "10.10.10.0/24"

// defaultRunDir is the host's runtime directory: /run on Linux; macOS
// has only /var/run.
var defaultRunDir = map[bool]string{true: "/var/run", false: "/run"}[runtime.GOOS == "darwin"]

// HelperPaths are the accepted qemu-bridge-helper locations, in the order
// they are tried.
var HelperPaths = []string{
	"/usr/lib/qemu/qemu-bridge-helper",      // Debian, Ubuntu
	"/usr/libexec/qemu-bridge-helper",       // Fedora, RHEL, Arch
	"/usr/local/libexec/qemu-bridge-helper", // source builds
}

// HelperPath is the one qemu-bridge-helper Barn uses, the one barn-net
// sets up and the one QEMU's private NIC runs: BARN_NET_HELPER when set
// (found, whether or not it exists), else the first of HelperPaths that
// exists. With neither, found is false and path is HelperPaths[0] (for
// messages).
func HelperPath(getenv func(string) string) (path string, found bool) {
	if p := getenv("BARN_NET_HELPER"); p != "" {
		return p, true
	}
	for _, p := range HelperPaths {
		if _, err := os.Lstat(p); err == nil {
			return p, true
		}
	}
	return HelperPaths[0], false
}

// Host is the machine being changed: every path outside the process and
// every external effect, so that tests redirect them.
type Host struct {
	EtcDir   string // "/etc"
	StateDir string // "/var/lib/barn"
	RunDir   string // defaultRunDir unless BARN_NET_RUN (named network namespaces: <RunDir>/netns/NAME; barn-net's locks)
	ProcDir  string // "/proc" when empty (tests point it at a fixture tree)
	Helper   string // qemu-bridge-helper path
	QEMU     string // qemu-system-x86_64 binary for the attach proof
	Bridge   string // bridge name, default barn0
	Tun      string // the TUN clone device, "/dev/net/tun" when empty (tests point it at a file)

	// UID is the user whose access Preflight judges (default: the effective uid).
	UID int
	// AttachUID/AttachGID run the QEMU of the readiness proof. Default: the
	// sudo caller (SUDO_UID/SUDO_GID) when running as root, else nobody
	// (65534) when root, else the current user.
	AttachUID, AttachGID int

	// Runner executes external commands (nmcli, systemctl, networkctl).
	Runner Runner
	// Firewalld answers and changes firewalld's zone bindings; nil means
	// FirewalldBus, the system bus.
	Firewalld Firewalld
	// Prover runs the readiness proof; nil means the real QEMU attach.
	Prover func(ctx context.Context, h *Host, p *Plan) error
	// FailAfter injects a failure right after the step with this ID was
	// applied (tests only; never set from the environment).
	FailAfter string
	// FaultHook is called after every durable step of a fault install or
	// heal (faultops.go; tests inject crashes; never set from the
	// environment by the shipped tools).
	FaultHook func(step string)
	// CrashAfter, when set, is called right after a step's effect ("install")
	// or undo ("uninstall") and before the manifest records it: the test
	// seam where barn-net kills itself (BARN_NET_TEST_CRASH_AFTER) to prove
	// that every crash converges (settleInFlight).
	CrashAfter func(phase, stepID string)
	// Link is the netlink implementation (tests use the real one inside a
	// namespace).
	Link LinkOps
}

// FromEnv returns the Host of this machine with the documented overrides
// (BARN_NET_ETC, BARN_NET_STATE, BARN_NET_RUN, BARN_NET_HELPER, BARN_BRIDGE,
// BARN_QEMU) read through getenv.
func FromEnv(getenv func(string) string) *Host {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	h := &Host{
		EtcDir: or(getenv("BARN_NET_ETC"), "/etc"), StateDir: or(getenv("BARN_NET_STATE"), "/var/lib/barn"),
		RunDir: or(getenv("BARN_NET_RUN"), defaultRunDir),
		QEMU:   or(getenv("BARN_QEMU"), "qemu-system-x86_64"), Bridge: or(getenv("BARN_BRIDGE"), DefaultBridge),
		UID: os.Geteuid(), Runner: ExecRunner{}, Link: NetlinkOps{},
	}
	h.Helper, _ = HelperPath(getenv)
	// The manifest path is written into bridge.conf for other installs to
	// name, and the locks are keyed on the state directory's and
	// bridge.conf's paths: all absolute.
	for _, p := range []*string{&h.StateDir, &h.EtcDir, &h.RunDir} {
		if abs, err := filepath.Abs(*p); err == nil {
			*p = abs
		}
	}
	h.AttachUID, h.AttachGID = os.Getuid(), os.Getgid()
	if h.AttachUID == 0 {
		h.AttachUID, h.AttachGID = 65534, 65534
		if u, err := strconv.Atoi(getenv("SUDO_UID")); err == nil && u > 0 {
			h.AttachUID = u
			if g, err := strconv.Atoi(getenv("SUDO_GID")); err == nil {
				h.AttachGID = g
			}
		}
	}
	return h
}

func or(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

// BridgeConf is the QEMU bridge ACL path (<EtcDir>/qemu/bridge.conf).
func (h *Host) BridgeConf() string { return filepath.Join(h.EtcDir, "qemu", "bridge.conf") }

// QemuConfDir is <EtcDir>/qemu.
func (h *Host) QemuConfDir() string { return filepath.Join(h.EtcDir, "qemu") }

// ManifestPath is the root-owned manifest (<StateDir>/network.json).
func (h *Host) ManifestPath() string { return filepath.Join(h.StateDir, "network.json") }

// NetworkdDir is <EtcDir>/systemd/network.
func (h *Host) NetworkdDir() string { return filepath.Join(h.EtcDir, "systemd", "network") }

// SystemdBooted reports whether systemd is PID 1 (<RunDir>/systemd/system exists).
func (h *Host) SystemdBooted() bool {
	fi, err := os.Stat(filepath.Join(h.RunDir, "systemd", "system"))
	return err == nil && fi.IsDir()
}

func (h *Host) bridge() string { return or(h.Bridge, DefaultBridge) }

// Runner runs one external command and returns its combined output.
type Runner interface {
	Run(ctx context.Context, argv []string) ([]byte, error)
}

// ExecRunner runs commands with os/exec. Path, when set, is searched before
// PATH for the command and prepended to the child's PATH (tests point it at
// recording fakes).
type ExecRunner struct{ Path string }

// Run implements Runner.
func (r ExecRunner) Run(ctx context.Context, argv []string) ([]byte, error) {
	name := argv[0]
	if r.Path != "" && filepath.Base(name) == name {
		for _, dir := range filepath.SplitList(r.Path) {
			p := filepath.Join(dir, name)
			if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
				name = p
				break
			}
		}
	}
	cmd := exec.CommandContext(ctx, name, argv[1:]...)
	if r.Path != "" {
		cmd.Env = append(os.Environ(), "PATH="+r.Path+string(filepath.ListSeparator)+os.Getenv("PATH"))
	}
	return cmd.CombinedOutput()
}
