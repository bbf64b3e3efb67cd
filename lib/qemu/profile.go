// Package qemu builds the QEMU command line of a Barn node: a pure function
// of the node spec, its resolved image, its prepared artifacts and the host's
// runtime profile (binary, accelerator, private-network attachment).
//
// The argv shape follows the reference behaviour, Appendix B, and QEMU's own
// documentation (docs/system/invocation.rst, qapi/block-core.json for
// -blockdev). Nothing here runs QEMU except ProbeVersion.
package qemu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"barn.dev/lib/exitcode"
)

// Accelerators and private-network modes of a Profile.
const (
	AccelKVM = "kvm"
	AccelTCG = "tcg"

	// PrivateNetBridge attaches the private NIC to the host bridge through
	// qemu-bridge-helper (the only production mode on Linux).
	PrivateNetBridge = "bridge"
	// PrivateNetNone omits the private NIC entirely. TEST-ONLY: it exists so
	// tests can run QEMU on a machine without the barn0 bridge; a node
	// launched this way has no private address.
	PrivateNetNone = "none"

	// DefaultBridge is the host bridge the private NICs attach to.
	DefaultBridge = "barn0"
)

// Profile is the host-side runtime profile shared by every node launched on
// this host. It is part of the node's runtime identity: a changed Accel is
// runtime drift.
type Profile struct {
	Binary       string // absolute path of qemu-system-<arch>
	Accel        string // "kvm" or "tcg"
	Machine      string // "q35"
	CPU          string // "host" (kvm) or "max" (tcg)
	Bridge       string // host bridge for the private NIC, default "barn0"
	BridgeHelper string // absolute path of qemu-bridge-helper
	PrivateNet   string // "bridge" (default) or "none" (TEST-ONLY, see PrivateNetNone)
	Version      string // "7.2.22" when probed with ProbeVersion, else ""
}

// TCGNotice is the sentence every TCG run prints: figures are not meaningful.
const TCGNotice = "accelerator: TCG (software emulation, explicitly requested); performance figures are not meaningful"

// kvmUsable reports whether /dev/kvm can be opened read-write and, when
// qemu-system-x86_64 is installed, whether a KVM vCPU can really be set up:
// some hosts expose a /dev/kvm that QEMU aborts on ("failed to set MSR"),
// which only a smoke start shows. The answer is computed once per process.
// A variable so tests can pin the host's answer.
var kvmUsable = sync.OnceValue(func() bool {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return false
	}
	f.Close()
	bin, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return true // nothing to smoke-test with; the open is the best evidence
	}
	return kvmSmoke(bin, 400*time.Millisecond)
})

// kvmSmoke starts bin paused (-S) with KVM and the CPU model Barn uses
// (-cpu host). A broken KVM makes QEMU exit within milliseconds; one that
// is still running after wait is usable (it is then killed).
func kvmSmoke(bin string, wait time.Duration) bool {
	cmd := exec.Command(bin, "-accel", "kvm", "-machine", "q35", "-cpu", "host",
		"-display", "none", "-nodefaults", "-no-user-config", "-S")
	if err := cmd.Start(); err != nil {
		return false
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		return false
	case <-time.After(wait):
		_ = cmd.Process.Kill()
		<-done
		return true
	}
}

// bridgeHelperPaths are the distro locations of qemu-bridge-helper.
var bridgeHelperPaths = []string{
	"/usr/lib/qemu/qemu-bridge-helper",      // Debian, Ubuntu
	"/usr/libexec/qemu-bridge-helper",       // Fedora, RHEL, Arch
	"/usr/local/libexec/qemu-bridge-helper", // source builds
}

// DetectProfile decides the runtime profile from the environment:
//
//   - BARN_QEMU: the QEMU binary (absolute path or a name looked up with
//     lookPath); default qemu-system-x86_64. Hosts other than amd64 are a
//     capability error (reason host_arch_unsupported).
//   - BARN_ACCEL: "" (KVM required), "kvm" (KVM required) or "tcg" (explicit
//     software emulation). When KVM is required and /dev/kvm is not usable the
//     result is a capability error (exit 3) with reason
//     "accelerator_unavailable" — never a silent fallback to TCG.
//   - BARN_BRIDGE: the private bridge (default "barn0").
//   - BARN_BRIDGE_HELPER: qemu-bridge-helper's path (default: first existing
//     distro path).
//   - BARN_PRIVATE_NET: "bridge" (default) or "none" (TEST-ONLY).
//
// It runs nothing; see ProbeVersion for the version.
func DetectProfile(getenv func(string) string, lookPath func(string) (string, error)) (Profile, error) {
	p := Profile{Machine: "q35", Bridge: DefaultBridge, PrivateNet: PrivateNetBridge}
	if runtime.GOARCH != "amd64" {
		// The command line is built and proven for x86_64 q35 guests only.
		return Profile{}, exitcode.New(exitcode.Capability,
			"this Barn launches amd64 (q35) guests on amd64 hosts only; the host is %s", runtime.GOARCH).
			WithReason("host_arch_unsupported")
	}

	switch accel := getenv("BARN_ACCEL"); accel {
	case "", AccelKVM:
		if !kvmUsable() {
			return Profile{}, exitcode.New(exitcode.Capability,
				"no usable hardware accelerator: /dev/kvm is missing or not accessible to this user; Barn does not fall back to TCG silently").
				WithReason("accelerator_unavailable").
				WithNext("export BARN_ACCEL=tcg   # explicit software emulation (slow; performance figures not meaningful), then run the command again")
		}
		p.Accel, p.CPU = AccelKVM, "host"
	case AccelTCG:
		p.Accel, p.CPU = AccelTCG, "max"
	default:
		return Profile{}, exitcode.New(exitcode.Usage, "BARN_ACCEL=%q: want \"kvm\" or \"tcg\"", accel).
			WithReason("invalid_accelerator")
	}

	name := getenv("BARN_QEMU")
	if name == "" {
		name = "qemu-system-x86_64"
	}
	bin := name
	if !filepath.IsAbs(bin) {
		found, err := lookPath(name)
		if err != nil {
			return Profile{}, exitcode.Wrap(exitcode.Capability, err, "QEMU binary %q not found", name).
				WithReason("qemu_missing").
				WithNext("sudo apt-get install qemu-system-x86 qemu-utils")
		}
		if bin, err = filepath.Abs(found); err != nil {
			return Profile{}, exitcode.Wrap(exitcode.Capability, err, "QEMU binary %q", found).WithReason("qemu_missing")
		}
	} else if _, err := lookPath(bin); err != nil {
		return Profile{}, exitcode.Wrap(exitcode.Capability, err, "QEMU binary %s is not executable", bin).
			WithReason("qemu_missing")
	}
	p.Binary = bin

	if b := getenv("BARN_BRIDGE"); b != "" {
		p.Bridge = b
	}
	switch pn := getenv("BARN_PRIVATE_NET"); pn {
	case "", PrivateNetBridge:
		p.PrivateNet = PrivateNetBridge
	case PrivateNetNone:
		p.PrivateNet = PrivateNetNone
	default:
		return Profile{}, exitcode.New(exitcode.Usage, "BARN_PRIVATE_NET=%q: want \"bridge\" or \"none\"", pn).
			WithReason("invalid_private_net")
	}
	if p.PrivateNet == PrivateNetBridge {
		helper := getenv("BARN_BRIDGE_HELPER")
		if helper == "" {
			for _, c := range bridgeHelperPaths {
				if _, err := os.Stat(c); err == nil {
					helper = c
					break
				}
			}
		}
		if helper == "" {
			return Profile{}, exitcode.New(exitcode.Capability,
				"qemu-bridge-helper not found (looked in %s)", strings.Join(bridgeHelperPaths, ", ")).
				WithReason("bridge_helper_missing").
				WithNext("barn-net install")
		}
		p.BridgeHelper = helper
	}
	return p, nil
}

// ErrNoVersion is returned by ProbeVersion when the binary's --version output
// has no "version X.Y.Z".
var ErrNoVersion = errors.New("no version in QEMU --version output")

// ProbeVersion runs `<binary> --version` (bounded by 5 s and ctx) and
// returns the version, e.g. "7.2.22".
func ProbeVersion(ctx context.Context, binary string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("running %s --version: %w", binary, err)
	}
	return parseVersion(out)
}

func parseVersion(out []byte) (string, error) {
	first, _, _ := bytes.Cut(out, []byte("\n"))
	fields := strings.Fields(string(first))
	for i, f := range fields {
		if f == "version" && i+1 < len(fields) {
			return fields[i+1], nil
		}
	}
	return "", fmt.Errorf("%w: %q", ErrNoVersion, first)
}
