package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"barn.dev/lib/lifecycle"
	"barn.dev/lib/qemu"
	"barn.dev/lib/testexec"
)

// probeGuest is a fake guest for rootProbeScript: what findmnt prints for
// /, what lsblk prints per column list and device (a device lsblk does
// not know fails as the real one does: "not a block device"), and sysfs
// files under /sys/class/block.
type probeGuest struct {
	findmnt string            // SOURCE FSTYPE SIZE of / (its MAJ:MIN is 254:1: the sys entry <kname>/dev says which device that is)
	lsblk   map[string]string // "COLUMNS DEVICE" -> output line
	sys     map[string]string // path under /sys/class/block -> content
}

// fakeLsblk answers `lsblk -ndro COLUMNS DEVICE` from ../lsblk/COLUMNS/DEVICE.
const fakeLsblk = `#!/bin/sh
f=$(dirname "$0")/../lsblk/$2/$(printf '%s' "$3" | tr / _)
[ -f "$f" ] || { echo "lsblk: $3: not a block device" >&2; exit 32; }
cat "$f"
`

// run runs rootProbeScript in g with sh (dash here, as in a Debian 12
// guest) and parses its output.
func (g probeGuest) run(t *testing.T) (lifecycle.RootFS, string, error) {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"bin/findmnt": "#!/bin/sh\ncase \"$*\" in *MAJ:MIN*) echo 254:1 ;; *) echo '" + g.findmnt + "' ;; esac\n",
		"bin/lsblk":   fakeLsblk,
	}
	for k, v := range g.lsblk {
		cols, dev, _ := strings.Cut(k, " ")
		files["lsblk/"+cols+"/"+strings.ReplaceAll(dev, "/", "_")] = v + "\n"
	}
	for k, v := range g.sys {
		files["sys/"+k] = v + "\n"
	}
	for p, body := range files {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := testexec.WriteScript(p, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	script := strings.ReplaceAll(rootProbeScript, "/sys/class/block", filepath.Join(dir, "sys"))
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(dir, "bin")+":"+os.Getenv("PATH"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe: %v\n%s", err, out)
	}
	fs, err := parseRootProbe(string(out))
	return fs, string(out), err
}

// debianDisk is Debian 12 genericcloud's layout on Barn's root disk vda
// (serial from sysfs: lsblk has none for virtio without ID_SERIAL_SHORT):
// vda14 (BIOS boot) and vda15 (EFI) before the root vda1.
func debianDisk() map[string]string {
	return map[string]string{
		"vda/size": "16777216", "vda/serial": qemu.RootDiskSerial,
		"vda1/dev": "254:1", "vda/dev": "254:0", "vda1/start": "262144", "vda1/size": "16515039", "vda/vda1/start": "262144",
		"vda14/start": "2048", "vda/vda14/start": "2048",
		"vda15/start": "8192", "vda/vda15/start": "8192",
	}
}

// A growable root on Barn's root disk is read as one whatever the
// partition naming or count; what the probe cannot place is reported
// without a device, never as a parse failure.
func TestRootProbeScriptLayouts(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip(err)
	}
	many := debianDisk()
	for i := 2; i <= 12; i++ { // vda2..vda12 before the root, vda1 last by start
		p := fmt.Sprintf("vda%d", i)
		many[p+"/start"] = "4096"
		many["vda/"+p+"/start"] = "4096"
	}
	cases := []struct {
		name  string
		g     probeGuest
		check func(lifecycle.RootFS) bool
	}{
		{"debian 12", probeGuest{findmnt: "/dev/vda1 ext4 8000000000",
			lsblk: map[string]string{"KNAME,TYPE,PKNAME /dev/vda1": "vda1 part vda", "SERIAL /dev/vda": ""}, sys: debianDisk()},
			growable("vda")},
		{"12 partitions", probeGuest{findmnt: "/dev/vda1 ext4 8000000000",
			lsblk: map[string]string{"KNAME,TYPE,PKNAME /dev/vda1": "vda1 part vda", "SERIAL /dev/vda": ""}, sys: many},
			growable("vda")},
		{"nvme", probeGuest{findmnt: "/dev/nvme0n1p2 xfs 8000000000",
			lsblk: map[string]string{"KNAME,TYPE,PKNAME /dev/nvme0n1p2": "nvme0n1p2 part nvme0n1", "SERIAL /dev/nvme0n1": qemu.RootDiskSerial},
			sys:   map[string]string{"nvme0n1p2/dev": "254:1", "nvme0n1p2/start": "2048", "nvme0n1p2/size": "1000", "nvme0n1/nvme0n1p1/start": "34", "nvme0n1/nvme0n1p2/start": "2048"}},
			growable("nvme0n1")},
		{"mmcblk", probeGuest{findmnt: "/dev/mmcblk0p2 ext4 8000000000",
			lsblk: map[string]string{"KNAME,TYPE,PKNAME /dev/mmcblk0p2": "mmcblk0p2 part mmcblk0", "SERIAL /dev/mmcblk0": qemu.RootDiskSerial},
			sys:   map[string]string{"mmcblk0p2/dev": "254:1", "mmcblk0p2/start": "2048", "mmcblk0p2/size": "1000", "mmcblk0/mmcblk0p1/start": "34", "mmcblk0/mmcblk0p2/start": "2048"}},
			growable("mmcblk0")},
		{"btrfs subvolume", probeGuest{findmnt: "/dev/vda1[/@rootfs] btrfs 8000000000",
			lsblk: map[string]string{"KNAME,TYPE,PKNAME /dev/vda1": "vda1 part vda", "SERIAL /dev/vda": ""}, sys: debianDisk()},
			func(fs lifecycle.RootFS) bool { return fs.FSType == "btrfs" }},
		// The kernel mounted the root itself (no initramfs): mountinfo,
		// and so findmnt, names it /dev/root, which is no device node and
		// which lsblk does not know, though findmnt's MAJ:MIN places it
		// (/sys/dev/block/254:1 is vda1). A growable ext4 root on vda1
		// must still be verified.
		{"root shown as /dev/root", probeGuest{findmnt: "/dev/root ext4 8000000000",
			lsblk: map[string]string{"KNAME,TYPE,PKNAME /dev/vda1": "vda1 part vda", "SERIAL /dev/vda": ""}, sys: debianDisk()},
			growable("vda")},
		// A root on another disk whose serial (read from sysfs, where
		// lsblk -r does not escape it) has a blank: the probe must still
		// parse, so the layout is named (not Barn's root disk) instead of
		// the probe failing.
		{"sysfs serial with a blank", probeGuest{findmnt: "/dev/vdb1 ext4 8000000000",
			lsblk: map[string]string{"KNAME,TYPE,PKNAME /dev/vdb1": "vdb1 part vdb", "SERIAL /dev/vdb": ""},
			sys:   map[string]string{"vdb/serial": "data disk 1", "vdb1/dev": "254:1", "vdb1/start": "2048", "vdb1/size": "1000", "vdb/vdb1/start": "2048"}},
			func(fs lifecycle.RootFS) bool { return fs.Disk == "vdb" && fs.DiskSerial != qemu.RootDiskSerial }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs, out, err := c.g.run(t)
			if err != nil || !c.check(fs) {
				t.Fatalf("probe output %q read as %+v, %v", out, fs, err)
			}
		})
	}
}

// growable checks a plain partition of Barn's root disk disk with no
// partition after it.
func growable(disk string) func(lifecycle.RootFS) bool {
	return func(fs lifecycle.RootFS) bool {
		return fs.DevType == "part" && fs.Disk == disk && fs.DiskSerial == qemu.RootDiskSerial && fs.Last && fs.PartStart > 0 && fs.PartBytes > 0
	}
}
