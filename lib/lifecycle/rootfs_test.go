package lifecycle

import (
	"strings"
	"testing"

	"barn.dev/lib/qemu"
)

// grownRoot is ext4 on vda1 of Barn's root disk, starting at 1 MiB and
// filling a disk of diskBytes as growpart and resize_rootfs leave it: the
// partition ends 1 MiB before the end, and statfs shows 1/64 less (ext4's
// inode tables) and a 64 MiB journal less.
func grownRoot(diskBytes int64) RootFS {
	part := diskBytes - 2<<20
	return RootFS{Source: "/dev/vda1", FSType: "ext4", SizeBytes: part - part/64 - 64<<20, DevType: "part",
		Disk: "vda", DiskSerial: qemu.RootDiskSerial, PartStart: 1 << 20, PartBytes: part, Last: true}
}

func TestRootGrowthProblem(t *testing.T) {
	const gib = int64(1) << 30
	cases := []struct {
		name string
		fs   func() RootFS
		disk int64
		want string // a fragment of the problem; "" when grown
	}{
		{"grown ext4", func() RootFS { return grownRoot(100 * gib) }, 100 * gib, ""},
		{"grown xfs", func() RootFS { f := grownRoot(8 * gib); f.FSType = "xfs"; return f }, 8 * gib, ""},
		// an ext4 root on a whole 256 GiB disk, as statfs showed it on a host
		{"whole disk", func() RootFS {
			return RootFS{Source: "/dev/vda", FSType: "ext4", SizeBytes: 270553174016, DevType: "disk", Disk: "vda",
				DiskSerial: qemu.RootDiskSerial, PartBytes: 256 * gib, Last: true}
		}, 256 * gib, ""},
		// an interrupted, abandoned resize left the disk larger than committed
		{"disk beyond the committed size", func() RootFS { return grownRoot(12 * gib) }, 10 * gib, ""},
		{"partition not grown", func() RootFS { return grownRoot(8 * gib) }, 9 * gib, "growpart did not grow it"},
		{"partition 20 MiB short", func() RootFS { return grownRoot(8*gib - 20<<20) }, 8 * gib, "growpart did not grow it"},
		{"filesystem not grown", func() RootFS {
			f := grownRoot(16 * gib)
			f.SizeBytes = grownRoot(8 * gib).SizeBytes
			return f
		}, 16 * gib, "resize_rootfs did not grow it"},
		{"btrfs", func() RootFS { f := grownRoot(8 * gib); f.FSType = "btrfs"; return f }, 8 * gib, "Barn grows only ext4 and XFS"},
		{"lvm", func() RootFS { f := grownRoot(8 * gib); f.DevType = "lvm"; return f }, 8 * gib, "of type lvm; growpart"},
		{"md", func() RootFS { f := grownRoot(8 * gib); f.DevType = "raid1"; return f }, 8 * gib, "of type raid1"},
		{"unknown device", func() RootFS { f := grownRoot(8 * gib); f.DevType = ""; return f }, 8 * gib, "of type unknown"},
		{"another disk", func() RootFS { f := grownRoot(8 * gib); f.Disk, f.DiskSerial = "vdb", "x4bq2mzk"; return f }, 8 * gib, "on disk vdb, not on Barn's root disk"},
		{"not the last partition", func() RootFS { f := grownRoot(8 * gib); f.Last = false; return f }, 8 * gib, "not the last one"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := rootLayoutProblem(c.fs())
			if got == "" {
				got = rootGrowthProblem(c.fs(), c.disk)
			}
			if c.want == "" && got != "" || !strings.Contains(got, c.want) {
				t.Fatalf("problem = %q, want %q", got, c.want)
			}
		})
	}
}

// The layout check does not look at sizes (a running node is checked
// before its disk grows); the growth check does.
func TestRootLayoutProblemIgnoresSizes(t *testing.T) {
	f := grownRoot(8 << 30)
	if p := rootLayoutProblem(f); p != "" {
		t.Fatalf("grown root: %q", p)
	}
	if p := rootGrowthProblem(f, 64<<30); p == "" {
		t.Fatal("a root filling 8 GiB of a 64 GiB disk must be a growth problem")
	}
	if p := rootLayoutProblem(f); p != "" {
		t.Fatalf("the layout of an ungrown root: %q", p)
	}
}
