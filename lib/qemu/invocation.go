package qemu

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"barn.dev/lib/imageref"
	"barn.dev/lib/quote"
	"barn.dev/lib/spec"
	"barn.dev/lib/vmrecord"
)

// Fixed guest-visible PCI slots of the NICs on pcie.0. They are pinned so the
// guest's predictable interface names (enp0s2, enp0s3) never move when disks
// or shares are added; the NIC devices come first on the command line so no
// auto-assigned device can take these slots.
const (
	ManagementNICAddr = "0x2"
	PrivateNICAddr    = "0x3"
)

// RootDiskSerial is the virtio serial of the root disk (≤20 bytes), visible
// in the guest as /dev/disk/by-id/virtio-barn-root.
const RootDiskSerial = "barn-root"

// MaxShares is the most 9p shares one node may have.
const MaxShares = spec.MaxShares

// BarnMonitorID is the chardev id of Barn's own QMP monitor
// (Runtime.BarnQMP).
const BarnMonitorID = "barn-qmp"

// MaxSocketPath is the longest unix socket path Linux accepts (sun_path
// is 108 bytes including the terminating NUL).
const MaxSocketPath = 107

// ShareFD is one 9p share whose host directory the caller opened as a
// directory descriptor; QEMU inherits it at FD and opens it as
// /proc/self/fd/<FD>.
type ShareFD struct {
	Tag      string // 9p mount tag, "barn-<20 hex>"
	FD       int    // descriptor number in QEMU (≥3)
	Readonly bool
}

// Input is everything a node's command line depends on besides the Profile.
// All paths are absolute.
type Input struct {
	Node      spec.Node
	VMUUID    string              // canonical lower-case UUID
	Image     imageref.Identity   // only Boot ("bios" or "uefi") is used
	RootDisk  string              // root.qcow2 (qcow2 overlay over Base)
	Base      string              // the verified base image (qcow2) RootDisk backs onto
	DataDisks []vmrecord.DataDisk // qcow2 data disks, in spec order
	Seed      string              // seed.iso (NoCloud cidata, raw)
	NVRAM     string              // per-node UEFI vars (uefi images only)
	Firmware  string              // read-only UEFI code (uefi images only)
	SSHPort   int                 // management forward 127.0.0.1:<SSHPort> → guest :22
	Runtime   vmrecord.Runtime    // QMP sockets (operators' and Barn's own) and pidfile
	SerialLog string              // serial console file
	// QEMULog is QEMU's own log (-D): with -daemonize, QEMU 7.2 points
	// its stderr there, so the reason it exits (an assertion, a failed
	// hot-plug, "terminating on signal") is kept instead of going to
	// /dev/null. QEMU opens it with fopen "w" at each start (truncated,
	// same inode). A path with '%' is not passed (QEMU's -D substitutes
	// its PID for one %d and refuses any other '%'; it has no escape):
	// QEMU's last words then go to /dev/null as without -D.
	QEMULog string
	Shares  []ShareFD
}

// Invocation returns the typed QEMU invocation for in under p: the binary,
// the argv without argv[0], and the inherited share descriptors. It is pure
// (no file system access) and deterministic; errors are usage errors
// (exitcode.Usage) naming the offending field and value.
func Invocation(in Input, p Profile) (vmrecord.Invocation, error) {
	if err := validate(in, p); err != nil {
		return vmrecord.Invocation{}, err
	}
	n := in.Node
	accel := p.Accel
	if accel == AccelTCG {
		accel = "tcg,thread=" + cmp.Or(p.TCGThread, TCGMulti)
	}
	a := &argv{}
	a.add("-name", quote.QEMUOpt(n.Name))
	a.add("-uuid", in.VMUUID)
	a.add("-machine", machineArg(p))
	a.add("-accel", accel)
	a.add("-cpu", p.CPU)
	headroom := HeadroomFor(n, p)
	a.add("-smp", smpArg(n, headroom))
	a.add("-m", memArg(n, headroom))
	a.add("-nodefaults")
	a.add("-no-user-config")
	a.add("-display", "none")
	// Two QMP monitors: QEMU serves each to one client at a time, so the
	// operators' -qmp socket can be held (socat, a debugging session)
	// while Barn's own, which no one else should use, stays free.
	a.add("-qmp", "unix:"+quote.QEMUOpt(in.Runtime.QMP)+",server=on,wait=off")
	a.add("-chardev", "socket,id="+BarnMonitorID+",path="+quote.QEMUOpt(in.Runtime.BarnQMP)+",server=on,wait=off")
	a.add("-mon", "chardev="+BarnMonitorID+",mode=control")
	a.add("-pidfile", in.Runtime.Pidfile) // a plain argument: taken literally
	// The serial console as a chardev: its path is a QemuOpts value like
	// every other path here ("-serial file:PATH" takes the rest literally,
	// a second syntax).
	a.add("-chardev", "file,id=serial0,path="+quote.QEMUOpt(in.SerialLog))
	a.add("-serial", "chardev:serial0")
	if !strings.Contains(in.QEMULog, "%") {
		a.add("-D", in.QEMULog) // a plain argument: taken literally but for '%'
	}
	a.add("-daemonize")

	if in.Image.Boot == "uefi" {
		a.add("-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+quote.QEMUOpt(in.Firmware))
		a.add("-drive", "if=pflash,format=raw,unit=1,file="+quote.QEMUOpt(in.NVRAM))
	}

	// NICs first, at pinned slots.
	a.add("-netdev", "user,id=mgmt,hostfwd=tcp:127.0.0.1:"+strconv.Itoa(in.SSHPort)+"-:22")
	a.add("-device", "virtio-net-pci,netdev=mgmt,mac="+n.MAC.Management+",bus=pcie.0,addr="+ManagementNICAddr)
	if p.PrivateNet == PrivateNetBridge {
		a.add("-netdev", "bridge,id=private,br="+quote.QEMUOpt(p.Bridge)+",helper="+quote.QEMUOpt(p.BridgeHelper))
		a.add("-device", "virtio-net-pci,netdev=private,mac="+n.MAC.Private+",bus=pcie.0,addr="+PrivateNICAddr)
	}

	// Root disk: the verified base opened read-only as its own node with
	// no backing of its own, then the overlay whose backing is that node
	// by reference. QEMU never opens a file an image header names: a
	// header rewritten to back onto another file (qemu-img rebase -u) is
	// not followed.
	a.add("-blockdev", blockdev(map[string]any{"driver": "file", "filename": in.Base, "node-name": "base-file", "read-only": true}))
	a.add("-blockdev", blockdev(map[string]any{"driver": "qcow2", "file": "base-file", "node-name": "base", "read-only": true, "backing": nil}))
	a.add("-blockdev", blockdev(map[string]any{"driver": "file", "filename": in.RootDisk, "node-name": "root-file"}))
	a.add("-blockdev", blockdev(map[string]any{"driver": "qcow2", "file": "root-file", "node-name": "root", "backing": "base"}))
	a.add("-device", "virtio-blk-pci,drive=root,id=root-disk,serial="+RootDiskSerial+",bootindex=1")

	for i, d := range in.DataDisks {
		file, node := fmt.Sprintf("disk%d-file", i), fmt.Sprintf("disk%d", i)
		a.add("-blockdev", blockdev(map[string]any{"driver": "file", "filename": d.Path, "node-name": file}))
		a.add("-blockdev", blockdev(map[string]any{"driver": "qcow2", "file": file, "node-name": node, "backing": nil}))
		a.add("-device", "virtio-blk-pci,drive="+node+",id="+node+"-disk,serial="+d.Serial)
	}

	// Seed: raw, read-only CD on virtio-scsi.
	a.add("-device", "virtio-scsi-pci,id=scsi0")
	a.add("-blockdev", blockdev(map[string]any{"driver": "file", "filename": in.Seed, "node-name": "seed-file", "read-only": true}))
	a.add("-blockdev", blockdev(map[string]any{"driver": "raw", "file": "seed-file", "node-name": "seed", "read-only": true}))
	a.add("-device", "scsi-cd,bus=scsi0.0,drive=seed,id=seed-cd")

	inherited := []vmrecord.InheritedFile{}
	for i, s := range in.Shares {
		id := fmt.Sprintf("share%d", i)
		opts := "local,id=" + id + ",path=/proc/self/fd/" + strconv.Itoa(s.FD) +
			",security_model=mapped-xattr,multidevs=remap,fmode=0600,dmode=0700"
		if s.Readonly {
			opts += ",readonly=on"
		}
		a.add("-fsdev", opts)
		a.add("-device", "virtio-9p-pci,fsdev="+id+",mount_tag="+s.Tag+",bus=pcie.0")
		inherited = append(inherited, vmrecord.InheritedFile{FD: s.FD, Kind: "share", ID: s.Tag})
	}

	return vmrecord.Invocation{Binary: p.Binary, Args: a.args, InheritedFiles: inherited, Headroom: headroom}, nil
}

const mib = 1 << 20

type argv struct{ args []string }

func (a *argv) add(s ...string) { a.args = append(a.args, s...) }

// blockdev renders a -blockdev argument in QEMU's JSON syntax (keys sorted by
// encoding/json), which needs no comma escaping for paths.
func blockdev(m map[string]any) string {
	b, err := json.Marshal(m)
	if err != nil {
		panic(err) // maps of strings and bools always marshal
	}
	return string(b)
}

// Lines renders args one flag per line: a flag followed by its value when
// the next element is not itself a flag. Used by golden tests and
// `barn-node status --verbose`.
func Lines(inv vmrecord.Invocation) []string {
	out := []string{inv.Binary}
	args := inv.Args
	for i := 0; i < len(args); i++ {
		line := args[i]
		if strings.HasPrefix(line, "-") && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			line += " " + args[i+1]
			i++
		}
		out = append(out, line)
	}
	return out
}

// machineArg is -machine's value: the profile's machine, and for an arm64
// guest under KVM (an arm64 host's native guest) the host's own interrupt
// controller (gic-version=host): virt defaults to a GICv2, which KVM on a
// host with a GICv3 and no v2 emulation (most arm64 servers) cannot give.
// Under TCG virt keeps its default (what the live arm64 lab boots).
func machineArg(p Profile) string {
	if p.Machine == "virt" && p.Accel == AccelKVM {
		return p.Machine + ",gic-version=host"
	}
	return p.Machine
}
