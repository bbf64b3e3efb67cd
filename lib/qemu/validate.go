package qemu

import (
	"path/filepath"
	"regexp"
	"strconv"

	"barn.dev/lib/exitcode"
)

var (
	nodeNameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]{0,61}[A-Za-z0-9])?$`)
	uuidRE     = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	macRE      = regexp.MustCompile(`^[0-9a-f]{2}(:[0-9a-f]{2}){5}$`)
	serialRE   = regexp.MustCompile(`^[A-Za-z0-9-]{1,20}$`)
	tagRE      = regexp.MustCompile(`^[A-Za-z0-9_-]{1,31}$`)
	bridgeRE   = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,15}$`)
)

const minMemoryBytes = 512 * mib

func invalid(field string, value any, why string) error {
	return exitcode.New(exitcode.Usage, "QEMU invocation: %s = %v: %s", field, value, why).
		WithReason("invalid_invocation")
}

func validate(in Input, p Profile) error {
	switch {
	case !filepath.IsAbs(p.Binary):
		return invalid("profile.binary", p.Binary, "must be an absolute path")
	case p.Accel != AccelKVM && p.Accel != AccelTCG:
		return invalid("profile.accel", p.Accel, `want "kvm" or "tcg"`)
	case p.Machine != "q35":
		return invalid("profile.machine", p.Machine, `want "q35"`)
	case p.CPU != "host" && p.CPU != "max":
		return invalid("profile.cpu", p.CPU, `want "host" or "max"`)
	case p.Accel == AccelTCG && p.CPU == "host":
		return invalid("profile.cpu", p.CPU, `"host" needs KVM`)
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

	n := in.Node
	switch {
	case !nodeNameRE.MatchString(n.Name):
		return invalid("node.name", n.Name, "not a host name")
	case !uuidRE.MatchString(in.VMUUID):
		return invalid("vm_uuid", in.VMUUID, "not a lower-case canonical UUID")
	case n.CPUs < 1 || n.CPUs > 256:
		return invalid("node.cpus", n.CPUs, "want 1–256")
	case n.MemoryBytes%mib != 0:
		return invalid("node.memory_bytes", n.MemoryBytes, "bytes must be a whole number of MiB")
	case n.MemoryBytes < minMemoryBytes:
		return invalid("node.memory_bytes", n.MemoryBytes, "bytes: want at least 512 MiB")
	case !macRE.MatchString(n.MAC.Management):
		return invalid("node.mac.management", n.MAC.Management, "not a lower-case colon-separated MAC")
	case p.PrivateNet == PrivateNetBridge && !macRE.MatchString(n.MAC.Private):
		return invalid("node.mac.private", n.MAC.Private, "not a lower-case colon-separated MAC")
	case in.SSHPort < 1 || in.SSHPort > 65535:
		return invalid("ssh_port", in.SSHPort, "want 1–65535")
	}
	for field, path := range map[string]string{
		"root_disk": in.RootDisk, "seed": in.Seed, "serial_log": in.SerialLog,
		"runtime.qmp": in.Runtime.QMP, "runtime.pidfile": in.Runtime.Pidfile,
	} {
		if !filepath.IsAbs(path) || filepath.Clean(path) != path {
			return invalid(field, path, "must be a clean absolute path")
		}
	}
	if l := len(in.Runtime.QMP); l > MaxSocketPath {
		return exitcode.New(exitcode.Usage, "QMP socket path %s is %d bytes; unix sockets allow at most %d",
			in.Runtime.QMP, l, MaxSocketPath).
			WithReason("socket_path_too_long").
			WithNext("BARN_RUNTIME_DIR=/tmp/barn-rt barn-node start   # a shorter runtime directory")
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
		if !serialRE.MatchString(d.Serial) {
			return invalid("data_disks["+strconv.Itoa(i)+"].serial", d.Serial, "want 1–20 of [A-Za-z0-9-]")
		}
		if serials[d.Serial] {
			return invalid("data_disks["+strconv.Itoa(i)+"].serial", d.Serial, "duplicate disk serial")
		}
		serials[d.Serial] = true
	}
	if len(in.Shares) > MaxShares {
		return invalid("shares", len(in.Shares), "at most 8 shares")
	}
	fds, tags := map[int]bool{}, map[string]bool{}
	for i, s := range in.Shares {
		if s.FD < 3 || fds[s.FD] {
			return invalid("shares["+strconv.Itoa(i)+"].fd", s.FD, "want a unique descriptor ≥3")
		}
		if !tagRE.MatchString(s.Tag) || tags[s.Tag] {
			return invalid("shares["+strconv.Itoa(i)+"].tag", s.Tag, "want a unique mount tag of 1–31 [A-Za-z0-9_-]")
		}
		fds[s.FD], tags[s.Tag] = true, true
	}
	return nil
}
