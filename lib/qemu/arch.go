package qemu

import (
	"runtime"
	"sort"
	"strings"

	"barn.dev/lib/exitcode"
)

// Target is how Barn runs guests of one architecture: the emulator, the
// machine, the UEFI firmware and the Debian packages that provide them.
type Target struct {
	Arch            string     // "amd64" or "arm64" (Barn's names)
	Binary          string     // qemu-system-x86_64, qemu-system-aarch64
	Package         string     // the Debian package of Binary
	Machine         string     // q35 (amd64), virt (arm64)
	Firmware        []Firmware // UEFI code+vars pairs, probed in order
	FirmwarePackage string     // the Debian package of Firmware
	// StrongMemoryOrder: the guest's memory model is stronger than a
	// weakly ordered host's (x86 TSO). Multi-threaded TCG of such a guest
	// on such a host (arm64) is unsafe, so it runs single-threaded.
	StrongMemoryOrder bool
}

// AAVMFPairs are the distro locations of arm64 UEFI firmware (AAVMF, the
// non-secure-boot builds, both padded to the virt machine's 64 MiB flash):
// Debian and Ubuntu (qemu-efi-aarch64), Fedora and RHEL (edk2-aarch64),
// Arch (edk2-aarch64).
var AAVMFPairs = []Firmware{
	{"/usr/share/AAVMF/AAVMF_CODE.fd", "/usr/share/AAVMF/AAVMF_VARS.fd"},
	{"/usr/share/edk2/aarch64/QEMU_EFI-pflash.raw", "/usr/share/edk2/aarch64/vars-template-pflash.raw"},
	{"/usr/share/edk2/aarch64/QEMU_CODE.fd", "/usr/share/edk2/aarch64/QEMU_VARS.fd"},
}

// Targets are the guest architectures Barn launches.
var Targets = map[string]Target{
	"amd64": {Arch: "amd64", Binary: "qemu-system-x86_64", Package: "qemu-system-x86", Machine: "q35",
		Firmware: FirmwarePairs, FirmwarePackage: "ovmf", StrongMemoryOrder: true},
	"arm64": {Arch: "arm64", Binary: "qemu-system-aarch64", Package: "qemu-system-arm", Machine: "virt",
		Firmware: AAVMFPairs, FirmwarePackage: "qemu-efi-aarch64"},
}

// ForeignCPU is the CPU model of every foreign guest: QEMU's "max", every
// feature TCG emulates. For arm64 under QEMU 7.2 that is an Armv8.x CPU
// (with SVE, pointer authentication and the virt machine's GICv2 under
// -cpu max unless asked otherwise); AAVMF and Debian's arm64 kernel boot
// on it. It is the same for every node and every start, so the guest sees
// one stable CPU model.
const ForeignCPU = "max"

// Thread modes of TCG (-accel tcg,thread=...).
const (
	TCGMulti  = "multi"  // one host thread per vCPU (MTTCG)
	TCGSingle = "single" // all vCPUs on one thread, round-robin
)

// HostArch is this host's architecture in Barn's names (runtime.GOARCH).
func HostArch() string { return runtime.GOARCH }

// TargetFor returns the Target of guest arch, or a capability error
// (reason guest_arch_unsupported) for an architecture Barn does not run.
func TargetFor(arch string) (Target, error) {
	t, ok := Targets[arch]
	if !ok {
		return Target{}, exitcode.New(exitcode.Capability, "guest architecture %q cannot run here: Barn runs %s guests", arch, strings.Join(TargetArchs(), " and ")).
			WithReason("guest_arch_unsupported").
			WithNext("set vm_arch: amd64 or arm64 (or remove vm_arch) in the inventory's all.vars")
	}
	return t, nil
}

// TargetArchs lists the architectures of Targets, sorted.
func TargetArchs() []string {
	out := make([]string, 0, len(Targets))
	for a := range Targets {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// Foreign reports whether a guest of arch runs emulated on host (TCG by
// policy, whatever BARN_ACCEL says).
func Foreign(guest, host string) bool { return guest != host }

// TCGThreads is the TCG thread mode policy for guest on host:
// single-threaded when the guest's memory order is stronger than a
// foreign host's (amd64 on arm64), multi-threaded otherwise.
func TCGThreads(guest, host string) string {
	if t, ok := Targets[guest]; ok && t.StrongMemoryOrder && Foreign(guest, host) {
		return TCGSingle
	}
	return TCGMulti
}

// ForeignProfile derives the profile of a foreign guest from base, the
// host's own profile (its private network attachment is kept): the
// target's emulator found with lookPath (absolute, symlinks resolved, as
// ResolveBinary), its machine, TCG with the thread policy of TCGThreads,
// and CPU ForeignCPU. The accelerator is policy: BARN_ACCEL is not read.
// A missing emulator is a capability error, reason qemu_missing, whose
// next step installs the target's package.
func ForeignProfile(base Profile, guest, host string, lookPath func(string) (string, error)) (Profile, error) {
	t, err := TargetFor(guest)
	if err != nil {
		return Profile{}, err
	}
	bin, err := ResolveBinary(func(string) string { return t.Binary }, lookPath)
	if err != nil {
		return Profile{}, exitcode.Wrap(exitcode.Capability, err,
			"the %s emulator %s is not installed: %s guests on this %s host need it", guest, t.Binary, guest, host).
			WithReason("qemu_missing").
			WithNext("sudo apt-get install " + t.Package + " " + t.FirmwarePackage)
	}
	p := base
	p.Arch, p.Binary, p.Machine = guest, bin, t.Machine
	p.Accel, p.CPU, p.TCGThread = AccelTCG, ForeignCPU, TCGThreads(guest, host)
	p.Version = ""
	return p, nil
}
