package qemu

import (
	"os"
	"strings"

	"barn.dev/lib/exitcode"
)

// Firmware is a UEFI firmware pair: the read-only code image and the
// variable store template each node's NVRAM starts as a copy of.
type Firmware struct {
	Code string `json:"code"`
	Vars string `json:"vars"`
}

// FirmwarePairs are the distro locations of x86_64 UEFI firmware (OVMF,
// non-secure-boot builds), probed in order: Debian and Ubuntu (4 MiB and
// 2 MiB flash), Fedora and RHEL, Arch.
var FirmwarePairs = []Firmware{
	{"/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"},
	{"/usr/share/OVMF/OVMF_CODE.fd", "/usr/share/OVMF/OVMF_VARS.fd"},
	{"/usr/share/edk2/ovmf/OVMF_CODE.fd", "/usr/share/edk2/ovmf/OVMF_VARS.fd"},
	{"/usr/share/edk2-ovmf/x64/OVMF_CODE.fd", "/usr/share/edk2-ovmf/x64/OVMF_VARS.fd"},
}

// FindFirmware returns the first pair whose two files are regular files,
// for amd64 guests (OVMF): FindFirmwareOf(Targets["amd64"], pairs).
func FindFirmware(pairs []Firmware) (Firmware, error) {
	return FindFirmwareOf(Targets["amd64"], pairs)
}

// FindFirmwareOf returns the first of pairs (nil: t.Firmware) whose two
// files are regular files. None is a capability error (exit 3) with reason
// "firmware_missing" and a next step installing t.FirmwarePackage.
func FindFirmwareOf(t Target, pairs []Firmware) (Firmware, error) {
	if pairs == nil {
		pairs = t.Firmware
	}
	looked := make([]string, 0, len(pairs))
	for _, p := range pairs {
		if regular(p.Code) && regular(p.Vars) {
			return p, nil
		}
		looked = append(looked, p.Code+" with "+p.Vars)
	}
	return Firmware{}, exitcode.New(exitcode.Capability, "no UEFI firmware for a uefi image: no %s code and vars pair found for %s guests (looked for %s; both must be non-empty regular files)", firmwareName(t), t.Arch, strings.Join(looked, ", ")).
		WithReason("firmware_missing").WithNext("sudo apt-get install " + t.FirmwarePackage)
}

func firmwareName(t Target) string {
	if t.Arch == "arm64" {
		return "AAVMF"
	}
	return "OVMF"
}

// regular reports whether p is a non-empty regular file (a truncated
// firmware package's empty file would pass a mere existence check, and a
// recreate would then destroy a node QEMU cannot boot).
func regular(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Size() > 0
}

// CheckGuestArch refuses a guest architecture this host cannot run: one
// Barn has no Target for (amd64 and arm64 it has), or any guest on a host
// whose own architecture has no Target. A foreign guest is accepted here
// (it runs under TCG by policy); whether its emulator is installed is
// proven before launch (ForeignProfile). The refusal is a capability
// error (exit 3) with reason "guest_arch_unsupported".
func CheckGuestArch(arch string) error {
	if _, ok := Targets[HostArch()]; !ok {
		return exitcode.New(exitcode.Capability, "guest architecture %s cannot run here: Barn runs guests on amd64 and arm64 hosts; the host is %s", arch, HostArch()).
			WithReason("guest_arch_unsupported")
	}
	_, err := TargetFor(arch)
	return err
}
