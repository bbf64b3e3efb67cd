package qemu

import (
	"fmt"
	"os"
	"runtime"
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

// FindFirmware returns the first pair whose two files are regular files.
// None is a capability error (exit 3) with reason "firmware_missing" and
// next "sudo apt-get install ovmf".
func FindFirmware(pairs []Firmware) (Firmware, error) {
	looked := make([]string, 0, len(pairs))
	for _, p := range pairs {
		if regular(p.Code) && regular(p.Vars) {
			return p, nil
		}
		looked = append(looked, p.Code)
	}
	return Firmware{}, exitcode.New(exitcode.Capability, "no UEFI firmware for a uefi image: no OVMF code and vars pair found (looked for %s)", strings.Join(looked, ", ")).
		WithReason("firmware_missing").WithNext("sudo apt-get install ovmf")
}

func regular(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// GuestArch is the only guest architecture this Barn launches: it builds
// qemu-system-x86_64 q35 command lines, on amd64 hosts (DetectProfile).
const GuestArch = "amd64"

// CheckGuestArch refuses a guest architecture this host cannot run:
// anything but amd64 (an arm64 guest would need qemu-system-aarch64, the
// virt machine and AAVMF firmware, none of which this Barn drives), or any
// guest on a host other than amd64. The refusal is a capability error
// (exit 3) with reason "guest_arch_unsupported".
func CheckGuestArch(arch string) error {
	if arch == GuestArch && runtime.GOARCH == GuestArch {
		return nil
	}
	why := fmt.Sprintf("this Barn launches amd64 guests (qemu-system-x86_64, q35) on amd64 hosts only; the host is %s", runtime.GOARCH)
	if arch == "arm64" {
		why += "; an arm64 guest needs qemu-system-aarch64, the virt machine and AAVMF (arm64 UEFI) firmware"
	}
	return exitcode.New(exitcode.Capability, "guest architecture %s cannot run here: %s", arch, why).
		WithReason("guest_arch_unsupported").
		WithNext("set vm_arch: amd64 (or remove vm_arch) in the inventory's all.vars")
}
