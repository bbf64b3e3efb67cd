package qemu

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/golden"
	"barn.dev/lib/imageref"
	"barn.dev/lib/spec"
	"barn.dev/lib/vmrecord"
)

const uuid1 = "6f1c2a52-8d0e-4c43-9a55-2b7f7f1d0c11"

func baseInput() Input {
	dir := "/home/u/.barn/nodes/pg-meta-1"
	rt := "/run/user/1000/barn/pg-meta-1"
	return Input{
		Node: spec.Node{Name: "pg-meta-1", Address: "10.10.10.10", CPUs: 2, MemoryBytes: 2 << 30,
			MAC: spec.NICs{Management: "52:54:00:0a:0a:0a", Private: "52:54:00:8a:0a:0a"}},
		VMUUID:    uuid1,
		Image:     imageref.Identity{Image: "d12", Version: "12.13", Arch: "amd64", Boot: "bios"},
		RootDisk:  dir + "/root.qcow2",
		Base:      "/home/u/.barn/images/d12/d12-12.13-amd64.qcow2",
		Seed:      dir + "/seed.iso",
		SSHPort:   2222,
		Runtime:   vmrecord.Runtime{Directory: rt, QMP: rt + "/qmp.sock", BarnQMP: rt + "/barn-qmp.sock", Pidfile: rt + "/qemu.pid"},
		SerialLog: dir + "/serial.log",
		QEMULog:   dir + "/qemu.log",
	}
}

func kvmProfile() Profile {
	return Profile{Binary: "/usr/bin/qemu-system-x86_64", Accel: AccelKVM, Machine: "q35", CPU: "host",
		Bridge: "barn0", BridgeHelper: "/usr/lib/qemu/qemu-bridge-helper", PrivateNet: PrivateNetBridge,
		Host: HostSize{CPUs: 8, MemoryBytes: 16 << 30}}
}

func arm64KVMProfile() Profile {
	p := kvmProfile()
	p.Arch, p.Binary, p.Machine = "arm64", "/usr/bin/qemu-system-aarch64", "virt"
	return p
}

func tcgProfile() Profile {
	return Profile{Binary: "/usr/bin/qemu-system-x86_64", Accel: AccelTCG, Machine: "q35", CPU: "max",
		PrivateNet: PrivateNetNone, Host: HostSize{CPUs: 2, MemoryBytes: 3 << 30}}
}

var goldenCases = []struct {
	name    string
	comment string
	in      func() Input
	p       Profile
}{
	{"bios-kvm-bridge-disks-shares", "BIOS image under KVM, private NIC on barn0, two data disks, two 9p shares (one read-only).",
		func() Input {
			in := baseInput()
			in.DataDisks = []vmrecord.DataDisk{
				{Name: "data", Path: "/home/u/.barn/nodes/pg-meta-1/data.qcow2", Serial: "x4bq2mzk7dfa3wq5nrt2"},
				{Name: "backup", Path: "/home/u/.barn/disks/pg-meta-1/backup/disk.qcow2", Serial: "kq3bz7wd2mf5ra4xn6tp"},
			}
			in.Shares = []ShareFD{{Tag: "barn-0123456789abcdef0123", FD: 3}, {Tag: "barn-fedcba9876543210fedc", FD: 4, Readonly: true}}
			return in
		}, kvmProfile()},
	{"uefi-tcg-no-private", "UEFI image under explicit TCG; PrivateNet none (test-only) omits the private NIC.",
		func() Input {
			in := baseInput()
			in.Image.Boot = "uefi"
			in.Firmware = "/usr/share/OVMF/OVMF_CODE_4M.fd"
			in.NVRAM = "/home/u/.barn/nodes/pg-meta-1/nvram.fd"
			return in
		}, tcgProfile()},
	{"comma-paths", "A state root and runtime directory with commas, spaces, '#', quotes and non-ASCII text: option values (-qmp, -chardev, -drive) double the commas (quote.QEMUOpt), -blockdev JSON and -pidfile take them as they are.",
		func() Input {
			in := baseInput()
			dir := `/home/u/barn home, #1 'q' "d" é/nodes/pg-meta-1`
			rt := `/run/user/1000/rt,x #2/pg-meta-1`
			in.RootDisk, in.Seed, in.SerialLog, in.QEMULog = dir+"/root.qcow2", dir+"/seed.iso", dir+"/serial.log", dir+"/qemu.log"
			in.Runtime = vmrecord.Runtime{Directory: rt, QMP: rt + "/qmp.sock", BarnQMP: rt + "/barn,qmp.sock", Pidfile: rt + "/qemu.pid"}
			in.Image.Boot, in.Firmware, in.NVRAM = "uefi", "/usr/share/OVMF/OVMF_CODE_4M.fd", dir+"/nvram.fd"
			in.DataDisks = []vmrecord.DataDisk{{Name: "data", Path: dir + "/data,1.qcow2", Serial: "x4bq2mzk7dfa3wq5nrt2"}}
			return in
		}, tcgProfile()},
	{"percent-home", "A state root with '%': QEMU's -D would substitute its PID for %d and refuses any other '%' (no escape), so -D is left out and QEMU's last words go to /dev/null.",
		func() Input {
			in := baseInput()
			dir := "/home/u/100%d/nodes/pg-meta-1"
			in.RootDisk, in.Seed, in.SerialLog, in.QEMULog = dir+"/root.qcow2", dir+"/seed.iso", dir+"/serial.log", dir+"/qemu.log"
			return in
		}, tcgProfile()},
}

// foreignLookPath finds every emulator under /usr/bin (argv golden tests
// need no installed QEMU).
func foreignLookPath(name string) (string, error) { return "/usr/bin/" + name, nil }

// foreignProfile is the profile of guest on host as ForeignProfile derives
// it from a bridged base profile.
func foreignProfile(guest, host string) Profile {
	base := kvmProfile()
	p, err := ForeignProfile(base, guest, host, foreignLookPath)
	if err != nil {
		panic(err)
	}
	return p
}

func init() {
	goldenCases = append(goldenCases,
		struct {
			name, comment string
			in            func() Input
			p             Profile
		}{"arm64-on-amd64", "An arm64 guest on an amd64 host: qemu-system-aarch64, the virt machine, multi-threaded TCG and CPU max by policy, AAVMF code read-only and the node's own vars; the same NICs, disks, seed and shares as amd64.",
			func() Input {
				in := baseInput()
				in.Image = imageref.Identity{Image: "d12", Version: "12.4", Arch: "arm64", Boot: "uefi"}
				in.Base = "/home/u/.barn/images/d12/d12-12.4-arm64.qcow2"
				in.Firmware, in.NVRAM = "/usr/share/AAVMF/AAVMF_CODE.fd", "/home/u/.barn/nodes/pg-meta-1/nvram.fd"
				in.DataDisks = []vmrecord.DataDisk{{Name: "data", Path: "/home/u/.barn/nodes/pg-meta-1/data.qcow2", Serial: "x4bq2mzk7dfa3wq5nrt2"}}
				in.Shares = []ShareFD{{Tag: "barn-0123456789abcdef0123", FD: 3}}
				return in
			}, foreignProfile("arm64", "amd64")},
		struct {
			name, comment string
			in            func() Input
			p             Profile
		}{"amd64-on-arm64", "An amd64 guest on an arm64 host: qemu-system-x86_64, q35, CPU max and single-threaded TCG by policy (x86's memory order is stronger than arm64's), OVMF.",
			func() Input {
				in := baseInput()
				in.Image.Boot = "uefi"
				in.Firmware, in.NVRAM = "/usr/share/OVMF/OVMF_CODE_4M.fd", "/home/u/.barn/nodes/pg-meta-1/nvram.fd"
				return in
			}, foreignProfile("amd64", "arm64")},
		struct {
			name, comment string
			in            func() Input
			p             Profile
		}{"arm64-native-kvm", "An arm64 guest on an arm64 host under KVM (its native guest): qemu-system-aarch64, virt with the host's GIC, CPU host, AAVMF. Argv only: no arm64 host runs Barn here.",
			func() Input {
				in := baseInput()
				in.Image = imageref.Identity{Image: "d12", Version: "12.4", Arch: "arm64", Boot: "uefi"}
				in.Base = "/home/u/.barn/images/d12/d12-12.4-arm64.qcow2"
				in.Firmware, in.NVRAM = "/usr/share/AAVMF/AAVMF_CODE.fd", "/home/u/.barn/nodes/pg-meta-1/nvram.fd"
				return in
			}, arm64KVMProfile()},
	)
}

func render(inv vmrecord.Invocation) string {
	var b strings.Builder
	for _, l := range Lines(inv) {
		b.WriteString(l + "\n")
	}
	return b.String()
}

func renderInherited(inv vmrecord.Invocation) string {
	var b strings.Builder
	for _, f := range inv.InheritedFiles {
		fmt.Fprintf(&b, "%d %s %s\n", f.FD, f.Kind, f.ID)
	}
	return b.String()
}

// TestInvocationGolden compares each case's argv, one flag per line, with
// testdata/invocation/<case>.txtar. BARN_UPDATE=1 rewrites the goldens.
func TestInvocationGolden(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			inv, err := Invocation(c.in(), c.p)
			if err != nil {
				t.Fatal(err)
			}
			got := &txtar.Archive{Comment: []byte(c.comment + "\n"), Files: []txtar.File{
				{Name: "argv", Data: []byte(render(inv))},
				{Name: "inherited", Data: []byte(renderInherited(inv))},
			}}
			golden.Check(t, filepath.Join("testdata", "invocation", c.name+".txtar"), txtar.Format(got))
			// Purity: the same input gives the same argv.
			again, _ := Invocation(c.in(), c.p)
			if render(again) != render(inv) {
				t.Error("Invocation is not deterministic")
			}
		})
	}
}

func TestInvocationInvariants(t *testing.T) {
	inv, err := Invocation(goldenCases[0].in(), goldenCases[0].p)
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(inv.Args, " ")
	for _, want := range []string{
		"-name pg-meta-1", "-uuid " + uuid1, "-machine q35", "-accel kvm", "-cpu host", "-smp 2", "-m 2048",
		"-nodefaults", "-no-user-config", "-display none", "-qmp unix:/run/user/1000/barn/pg-meta-1/qmp.sock,server=on,wait=off",
		"-chardev socket,id=barn-qmp,path=/run/user/1000/barn/pg-meta-1/barn-qmp.sock,server=on,wait=off",
		"-mon chardev=barn-qmp,mode=control",
		"-pidfile /run/user/1000/barn/pg-meta-1/qemu.pid", "-chardev file,id=serial0,path=/home/u/.barn/nodes/pg-meta-1/serial.log", "-serial chardev:serial0", "-daemonize",
		"hostfwd=tcp:127.0.0.1:2222-:22", "mac=52:54:00:0a:0a:0a,bus=pcie.0,addr=0x2", "mac=52:54:00:8a:0a:0a,bus=pcie.0,addr=0x3",
		"bridge,id=private,br=barn0,helper=/usr/lib/qemu/qemu-bridge-helper", "serial=barn-root,bootindex=1",
		"serial=x4bq2mzk7dfa3wq5nrt2", "scsi-cd,bus=scsi0.0,drive=seed", `"read-only":true`,
		"path=/proc/self/fd/4,security_model=mapped-xattr,multidevs=remap,fmode=0600,dmode=0700,readonly=on",
		"virtio-9p-pci,fsdev=share0,mount_tag=barn-0123456789abcdef0123,bus=pcie.0",
	} {
		if !strings.Contains(args, want) {
			t.Errorf("argv lacks %q", want)
		}
	}
	// NIC devices precede every other -device so their pinned slots are free.
	first := strings.Index(args, "-device ")
	if !strings.HasPrefix(args[first:], "-device virtio-net-pci,netdev=mgmt") {
		t.Errorf("first device is not the management NIC: %s", args[first:first+60])
	}
	if inv.Binary != "/usr/bin/qemu-system-x86_64" || len(inv.InheritedFiles) != 2 || inv.InheritedFiles[1].FD != 4 {
		t.Errorf("binary %q inherited %+v", inv.Binary, inv.InheritedFiles)
	}
}

func TestInvocationRejectsBadInput(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*Input, *Profile)
		field string
	}{
		{"zero cpus", func(in *Input, _ *Profile) { in.Node.CPUs = 0 }, "node.cpus"},
		{"257 cpus", func(in *Input, _ *Profile) { in.Node.CPUs = 257 }, "node.cpus"},
		{"memory not MiB", func(in *Input, _ *Profile) { in.Node.MemoryBytes = 1<<30 + 1 }, "node.memory_bytes"},
		{"memory 256 MiB", func(in *Input, _ *Profile) { in.Node.MemoryBytes = 256 << 20 }, "node.memory_bytes"},
		{"socket too long", func(in *Input, _ *Profile) { in.Runtime.QMP = "/" + strings.Repeat("s", 107) }, "socket path"},
		{"relative root", func(in *Input, _ *Profile) { in.RootDisk = "root.qcow2" }, "root_disk"},
		{"no base", func(in *Input, _ *Profile) { in.Base = "" }, "base"},
		{"relative qemu log", func(in *Input, _ *Profile) { in.QEMULog = "qemu.log" }, "qemu_log"},
		{"bad uuid", func(in *Input, _ *Profile) { in.VMUUID = "nope" }, "vm_uuid"},
		{"upper uuid", func(in *Input, _ *Profile) { in.VMUUID = strings.ToUpper(uuid1) }, "vm_uuid"},
		{"bad mac", func(in *Input, _ *Profile) { in.Node.MAC.Private = "52-54-00-00-00-01" }, "node.mac.private"},
		{"port 0", func(in *Input, _ *Profile) { in.SSHPort = 0 }, "ssh_port"},
		{"uefi without vars", func(in *Input, _ *Profile) { in.Image.Boot = "uefi"; in.Firmware = "/f.fd" }, "nvram"},
		{"bios with vars", func(in *Input, _ *Profile) { in.NVRAM = "/n.fd" }, "nvram"},
		{"share fd 2", func(in *Input, _ *Profile) { in.Shares = []ShareFD{{Tag: "barn-a", FD: 2}} }, "shares[0].fd"},
		{"dup serial", func(in *Input, _ *Profile) {
			in.DataDisks = []vmrecord.DataDisk{{Path: "/a.qcow2", Serial: "x4bq2mzk7dfa3wq5nrt2"}, {Path: "/b.qcow2", Serial: "x4bq2mzk7dfa3wq5nrt2"}}
		}, "data_disks[1].serial"},
		{"bad serial", func(in *Input, _ *Profile) { in.DataDisks = []vmrecord.DataDisk{{Path: "/a.qcow2", Serial: "s1"}} }, "data_disks[0].serial"},
		{"bad tag", func(in *Input, _ *Profile) { in.Shares = []ShareFD{{Tag: "barn-a", FD: 3}} }, "shares[0].tag"},
		{"9 shares", func(in *Input, _ *Profile) {
			for i := 0; i < 9; i++ {
				in.Shares = append(in.Shares, ShareFD{Tag: fmt.Sprintf("t%d", i), FD: 3 + i})
			}
		}, "shares"},
		{"no barn monitor", func(in *Input, _ *Profile) { in.Runtime.BarnQMP = "" }, "runtime.barn_qmp"},
		{"barn socket too long", func(in *Input, _ *Profile) { in.Runtime.BarnQMP = "/" + strings.Repeat("s", 107) }, "socket path"},
		{"tcg host cpu", func(_ *Input, p *Profile) { p.Accel = AccelTCG }, "profile.cpu"},
		{"relative binary", func(_ *Input, p *Profile) { p.Binary = "qemu" }, "profile.binary"},
		{"bridge without helper", func(_ *Input, p *Profile) { p.BridgeHelper = "" }, "profile.bridge_helper"},
		{"bad private net", func(_ *Input, p *Profile) { p.PrivateNet = "tap" }, "profile.private_net"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in, p := baseInput(), kvmProfile()
			c.edit(&in, &p)
			_, err := Invocation(in, p)
			e := exitcode.As(err)
			if e == nil || e.Class != exitcode.Usage || !strings.Contains(e.Message, c.field) {
				t.Fatalf("got %v, want a usage error naming %s", err, c.field)
			}
		})
	}
}
