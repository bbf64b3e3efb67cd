package lifecycle

import (
	"testing"

	"barn.dev/lib/qemu"
)

// root_not_grown only when the root does not fill its disk (found by a
// break-it review). An ext4 root made below 512 MiB gets mke2fs's "small" type
// (1 KiB blocks, inode_ratio 4096: its inode tables take 1/16 of the
// space, and keep that ratio when resize2fs grows it), which was more than
// the first filesystemSlack's 1/32 + 256 MiB once the partition passed 8 GiB.
// Measured with Debian 12's mke2fs 1.47.0 and mke2fs.conf: mkfs.ext4 on a
// 400 MiB file, grown to 20 GiB with resize2fs, shows 19643036 free 1 KiB
// blocks of 20971520 on the empty filesystem (statfs f_blocks is that
// plus the few blocks of / and lost+found). The root was grown; the check
// must not say it was not.
func TestRootGrowthProblemSmallTypeExt4(t *testing.T) {
	part := int64(20971520) << 10
	fs := RootFS{Source: "/dev/vda1", FSType: "ext4", SizeBytes: (19643036 + 64) << 10, DevType: "part",
		Disk: "vda", DiskSerial: qemu.RootDiskSerial, PartStart: 1 << 20, PartBytes: part, Last: true}
	if p := rootGrowthProblem(fs, part+2<<20); p != "" {
		t.Fatalf("a grown root made with mke2fs's small type: %s", p)
	}
}
