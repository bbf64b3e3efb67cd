// Package qemu builds the QEMU command line of a Barn node: a pure function
// of the node spec, its resolved image, its prepared artifacts and the host's
// runtime profile (binary, accelerator, private-network attachment).
//
// The argv shape follows the reference behaviour, Appendix B, and QEMU's own
// documentation (docs/system/invocation.rst, qapi/block-core.json for
// -blockdev). Nothing here runs QEMU except ProbeVersion and the paused
// smoke start (smoke.go).
package qemu

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/hostnet"
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
	Arch         string // guest architecture: "amd64" (q35) or "arm64" (virt); "" reads as amd64
	Binary       string // absolute path of qemu-system-<arch>
	Accel        string // "kvm" or "tcg"
	TCGThread    string // under TCG: "multi" (default when "") or "single" (TCGThreads)
	Machine      string // "q35" (amd64) or "virt" (arm64)
	CPU          string // "host" (kvm) or "max" (tcg)
	Bridge       string // host bridge for the private NIC, default "barn0"
	BridgeHelper string // absolute path of qemu-bridge-helper
	PrivateNet   string // "bridge" (default) or "none" (TEST-ONLY, see PrivateNetNone)
	Version      string // "7.2.22" when probed with ProbeVersion, else ""
	// Host is the host's size the hot-plug headroom is sized against
	// (HeadroomFor); zero gives no headroom.
	Host HostSize
}

// DetectProfile decides the runtime profile of this host's own (native)
// guests from the environment; see DetectProfileOf.
func DetectProfile(getenv func(string) string, lookPath func(string) (string, error)) (Profile, error) {
	return DetectProfileOf(HostArch(), getenv, lookPath)
}

// DetectProfileOf decides the runtime profile of native guests on a host
// of architecture host (Barn's names: amd64 runs q35 guests, arm64 virt
// guests; any other host is a capability error, reason
// host_arch_unsupported) from the environment:
//
//   - BARN_QEMU: the QEMU binary (absolute path or a name looked up with
//     lookPath); default the host target's emulator (qemu-system-x86_64,
//     qemu-system-aarch64).
//   - BARN_ACCEL: "" (KVM required), "kvm" (KVM required) or "tcg" (explicit
//     software emulation). When KVM is required and /dev/kvm is not usable the
//     result is a capability error (exit 3) with reason
//     "accelerator_unavailable" — never a silent fallback to TCG.
//   - BARN_BRIDGE: the private bridge (default "barn0").
//   - BARN_NET_HELPER: qemu-bridge-helper's path, the one barn-net sets
//     up (default: the first existing distro path; hostnet.HelperPath).
//   - BARN_PRIVATE_NET: "bridge" (default) or "none" (TEST-ONLY).
//
// Foreign guests derive their profile from this one (ForeignProfile). It
// runs nothing; see ProbeVersion for the version.
func DetectProfileOf(host string, getenv func(string) string, lookPath func(string) (string, error)) (Profile, error) {
	t, ok := Targets[host]
	if !ok {
		return Profile{}, exitcode.New(exitcode.Capability,
			"this Barn runs on amd64 and arm64 hosts only; the host is %s", host).
			WithReason("host_arch_unsupported")
	}
	p := Profile{Arch: t.Arch, Machine: t.Machine, TCGThread: TCGMulti, Bridge: DefaultBridge, PrivateNet: PrivateNetBridge, Host: DetectHostSize()}

	switch accel := getenv("BARN_ACCEL"); accel {
	case "", AccelKVM:
		if kvm := kvmUsable(); !kvm.OK {
			return Profile{}, exitcode.New(exitcode.Capability,
				"no usable hardware accelerator (%s); Barn does not fall back to TCG silently", kvm.Evidence).
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

	bin, err := ResolveBinary(func(k string) string {
		if k == "BARN_QEMU" {
			return cmp.Or(getenv(k), t.Binary)
		}
		return getenv(k)
	}, lookPath)
	if err != nil {
		return Profile{}, err
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
		if p.BridgeHelper, err = FindBridgeHelper(getenv); err != nil {
			return Profile{}, err
		}
	}
	return p, nil
}

// ResolveBinary finds the QEMU binary DetectProfile uses: BARN_QEMU (an
// absolute path, or a name looked up with lookPath), default
// qemu-system-x86_64, made absolute with its symlinks resolved
// (filepath.EvalSymlinks; a path that cannot be resolved is kept as
// found). The result is the file /proc/<pid>/exe shows for the QEMU it
// runs, so the invocation's binary (argv[0]) and the process's executable
// name the same path (procid.SameExecutable): with /bin a symlink to
// /usr/bin, `qemu-system-x86_64` found as /bin/qemu-system-x86_64 becomes
// /usr/bin/qemu-system-x86_64. Not found is a capability error, reason
// qemu_missing.
func ResolveBinary(getenv func(string) string, lookPath func(string) (string, error)) (string, error) {
	name := cmp.Or(getenv("BARN_QEMU"), Targets[HostArch()].Binary, "qemu-system-x86_64")
	bin := name
	if filepath.IsAbs(name) {
		if _, err := lookPath(name); err != nil {
			return "", exitcode.Wrap(exitcode.Capability, err, "QEMU binary %s is not executable", name).
				WithReason("qemu_missing")
		}
	} else {
		found, err := lookPath(name)
		if err != nil {
			return "", exitcode.Wrap(exitcode.Capability, err, "QEMU binary %q not found", name).
				WithReason("qemu_missing").
				WithNext("sudo apt-get install " + packageOf(name) + " qemu-utils")
		}
		if bin, err = filepath.Abs(found); err != nil {
			return "", exitcode.Wrap(exitcode.Capability, err, "QEMU binary %q", found).WithReason("qemu_missing")
		}
	}
	if resolved, err := filepath.EvalSymlinks(bin); err == nil {
		bin = resolved
	}
	return bin, nil
}

// packageOf is the Debian package of the emulator named name (a Target's
// Binary), qemu-system-x86 for any other name.
func packageOf(name string) string {
	for _, t := range Targets {
		if t.Binary == name {
			return t.Package
		}
	}
	return Targets["amd64"].Package
}

// FindBridgeHelper finds qemu-bridge-helper as barn-net does
// (hostnet.HelperPath: BARN_NET_HELPER, else the first distro path that
// exists). None is a capability error, reason bridge_helper_missing.
func FindBridgeHelper(getenv func(string) string) (string, error) {
	if helper, found := hostnet.HelperPath(getenv); found {
		return helper, nil
	}
	return "", exitcode.New(exitcode.Capability,
		"qemu-bridge-helper not found (looked in %s)", strings.Join(hostnet.HelperPaths, ", ")).
		WithReason("bridge_helper_missing").
		WithNext("sudo apt-get install qemu-system-common")
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
	return ParseVersion(out)
}

// ParseVersion reads "X.Y.Z" from the first line of `qemu-* --version`
// output ("QEMU emulator version 7.2.22 (Debian …)"); ErrNoVersion when
// there is none.
func ParseVersion(out []byte) (string, error) {
	first, _, _ := bytes.Cut(out, []byte("\n"))
	fields := strings.Fields(string(first))
	for i, f := range fields {
		if f == "version" && i+1 < len(fields) {
			return fields[i+1], nil
		}
	}
	return "", fmt.Errorf("%w: %q", ErrNoVersion, first)
}
