package qemu

import (
	"cmp"
	"fmt"
	"path/filepath"
	"strconv"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/lazyre"
	"barn.dev/lib/spec"
)

var (
	uuidRE   = lazyre.New(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	bridgeRE = lazyre.New(`^[A-Za-z0-9_.-]{1,15}$`)
)

func invalid(field string, value any, why string) error {
	return exitcode.New(exitcode.Usage, "QEMU invocation: %s = %v: %s", field, value, why).
		WithReason("invalid_invocation")
}

// breaks reports a spec rule's violation of field as an invalid
// invocation; nil when the rule holds.
func breaks(field string, value any, v *spec.Violation) error {
	if v == nil {
		return nil
	}
	return invalid(field, value, v.Problem)
}

func validate(in Input, p Profile) error {
	switch {
	case !filepath.IsAbs(p.Binary):
		return invalid("profile.binary", p.Binary, "must be an absolute path")
	case p.Accel != AccelKVM && p.Accel != AccelTCG:
		return invalid("profile.accel", p.Accel, `want "kvm" or "tcg"`)
	case p.Arch != "" && p.Arch != "amd64" && p.Arch != "arm64":
		return invalid("profile.arch", p.Arch, `want "amd64" or "arm64"`)
	case p.Machine != Targets[cmp.Or(p.Arch, "amd64")].Machine:
		return invalid("profile.machine", p.Machine, fmt.Sprintf("want %q for %s guests", Targets[cmp.Or(p.Arch, "amd64")].Machine, cmp.Or(p.Arch, "amd64")))
	case p.TCGThread != "" && p.TCGThread != TCGMulti && p.TCGThread != TCGSingle:
		return invalid("profile.tcg_thread", p.TCGThread, `want "multi" or "single"`)
	case p.CPU != "host" && p.CPU != "max":
		return invalid("profile.cpu", p.CPU, `want "host" or "max"`)
	case p.Accel == AccelTCG && p.CPU == "host":
		return invalid("profile.cpu", p.CPU, `"host" needs KVM`)
	}
	guest := cmp.Or(p.Arch, "amd64")
	if in.Image.Arch != "" && in.Image.Arch != guest {
		return invalid("image.arch", in.Image.Arch, fmt.Sprintf("the profile launches %s guests", guest))
	}
	if guest == "arm64" && in.Image.Boot != "uefi" {
		return invalid("image.boot", in.Image.Boot, `arm64 guests (virt machine) boot UEFI only`)
	}
	switch p.PrivateNet {
	case PrivateNetBridge:
		if !bridgeRE.MatchString(p.Bridge) {
			return invalid("profile.bridge", p.Bridge, "not an interface name (1–15 of [A-Za-z0-9_.-])")
		}
		if !filepath.IsAbs(p.BridgeHelper) {
			return invalid("profile.bridge_helper", p.BridgeHelper, "must be an absolute path")
		}
	case PrivateNetNone:
	default:
		return invalid("profile.private_net", p.PrivateNet, `want "bridge" or "none"`)
	}

	// The node's own fields by the spec's rules (the same functions
	// barn-inventory resolved them with).
	n := in.Node
	if err := cmp.Or(
		breaks("node.name", n.Name, spec.CheckNodeName(n.Name)),
		breaks("node.cpus", n.CPUs, spec.CheckCPUs(n.CPUs)),
		breaks("node.memory_bytes", n.MemoryBytes, spec.CheckMemory(n.MemoryBytes)),
		breaks("node.mac.management", n.MAC.Management, spec.CheckMAC(n.MAC.Management)),
	); err != nil {
		return err
	}
	if p.PrivateNet == PrivateNetBridge {
		if err := breaks("node.mac.private", n.MAC.Private, spec.CheckMAC(n.MAC.Private)); err != nil {
			return err
		}
	}
	switch {
	case !uuidRE.MatchString(in.VMUUID):
		return invalid("vm_uuid", in.VMUUID, "not a lower-case canonical UUID")
	case in.SSHPort < 1 || in.SSHPort > 65535:
		return invalid("ssh_port", in.SSHPort, "want 1–65535")
	}
	for field, path := range map[string]string{
		"root_disk": in.RootDisk, "base": in.Base, "seed": in.Seed, "serial_log": in.SerialLog, "qemu_log": in.QEMULog,
		"runtime.qmp": in.Runtime.QMP, "runtime.barn_qmp": in.Runtime.BarnQMP, "runtime.pidfile": in.Runtime.Pidfile,
	} {
		if !filepath.IsAbs(path) || filepath.Clean(path) != path {
			return invalid(field, path, "must be a clean absolute path")
		}
	}
	for _, sock := range []string{in.Runtime.QMP, in.Runtime.BarnQMP} {
		if l := len(sock); l > MaxSocketPath {
			return exitcode.New(exitcode.Usage, "QMP socket path %s is %d bytes; unix sockets allow at most %d",
				sock, l, MaxSocketPath).
				WithReason("socket_path_too_long").
				WithNext("export BARN_RUNTIME_DIR=/var/tmp/barn-$(id -u)   # any short directory that survives logout (not under $XDG_RUNTIME_DIR)")
		}
	}
	switch in.Image.Boot {
	case "uefi":
		if !filepath.IsAbs(in.Firmware) {
			return invalid("firmware", in.Firmware, "uefi images need absolute UEFI code path")
		}
		if !filepath.IsAbs(in.NVRAM) {
			return invalid("nvram", in.NVRAM, "uefi images need an absolute per-node vars path")
		}
	case "bios", "":
		if in.NVRAM != "" || in.Firmware != "" {
			return invalid("nvram", in.NVRAM, "only uefi images take firmware and vars")
		}
	default:
		return invalid("image.boot", in.Image.Boot, `want "bios" or "uefi"`)
	}
	serials := map[string]bool{RootDiskSerial: true}
	for i, d := range in.DataDisks {
		if !filepath.IsAbs(d.Path) || filepath.Clean(d.Path) != d.Path {
			return invalid("data_disks["+strconv.Itoa(i)+"].path", d.Path, "must be a clean absolute path")
		}
		if err := breaks("data_disks["+strconv.Itoa(i)+"].serial", d.Serial, spec.CheckDiskSerial(d.Serial)); err != nil {
			return err
		}
		if serials[d.Serial] {
			return invalid("data_disks["+strconv.Itoa(i)+"].serial", d.Serial, "duplicate disk serial")
		}
		serials[d.Serial] = true
	}
	if len(in.Shares) > spec.MaxShares {
		return invalid("shares", len(in.Shares), fmt.Sprintf("at most %d shares", spec.MaxShares))
	}
	fds, tags := map[int]bool{}, map[string]bool{}
	for i, s := range in.Shares {
		if s.FD < 3 || fds[s.FD] {
			return invalid("shares["+strconv.Itoa(i)+"].fd", s.FD, "want a unique descriptor ≥3")
		}
		if err := breaks("shares["+strconv.Itoa(i)+"].tag", s.Tag, spec.CheckShareTag(s.Tag)); err != nil {
			return err
		}
		if tags[s.Tag] {
			return invalid("shares["+strconv.Itoa(i)+"].tag", s.Tag, "duplicate mount tag")
		}
		fds[s.FD], tags[s.Tag] = true, true
	}
	return nil
}
