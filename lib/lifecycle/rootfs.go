package lifecycle

import (
	"context"
	"fmt"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/qemu"
	"barn.dev/lib/state"
)

// RootFS is a running guest's root filesystem and the block device under
// it, as the guest reports them in one probe (sizes and offsets in bytes).
type RootFS struct {
	Source    string // the mounted device, e.g. /dev/vda1
	FSType    string // e.g. ext4, xfs
	SizeBytes int64  // the filesystem's size as statfs reports it
	// DevType is the source's block device type as lsblk names it:
	// part, disk, lvm, crypt, raid1, md, ...; "" when lsblk knew none.
	DevType string
	// Disk is the kernel name of the whole disk holding the source (the
	// source itself unless DevType is part), e.g. vda; DiskSerial is its
	// serial (Barn's root disk is qemu.RootDiskSerial).
	Disk, DiskSerial string
	// PartStart and PartBytes are the source's offset on Disk and its
	// size (0 and the device's size unless DevType is part).
	PartStart, PartBytes int64
	// Last is whether no other partition of Disk starts after the source.
	Last bool
}

// RootProbe reads a running guest's root filesystem over the management
// connection.
type RootProbe interface {
	RootFS(ctx context.Context, n *state.Node) (RootFS, error)
}

// growableFS are the root filesystems the guest's resize_rootfs grows
// online at boot.
var growableFS = map[string]bool{"ext4": true, "xfs": true}

// partitionSlack is how far before the end of the root disk a grown root
// partition may end: growpart leaves the GPT backup header (33 sectors)
// and rounds to the 1 MiB alignment; 16 MiB bounds both with room. A
// partition that was not grown ends at least the growth before the end,
// so only a growth under 16 MiB goes unseen.
const partitionSlack = 16 << 20

// filesystemSlack is how much smaller than its partition (part bytes) a
// grown root filesystem may look: statfs leaves out ext4's inode tables
// (1/64 of the space at 16 KiB per 256-byte inode; 1/16 for a filesystem
// made below 512 MiB, mke2fs's "small" type, which keeps its ratio when
// resize2fs grows it), bitmaps and group descriptors, and its journal
// (64 MiB for a filesystem made below 16 GiB, as cloud images are, at
// most 1 GiB), and XFS its internal log. 1/16 of the partition plus
// 256 MiB bounds these. A filesystem that was not grown after its
// partition grew by less than that is not told from one that was; the
// partition check still catches a growpart that did not run.
func filesystemSlack(part int64) int64 { return part/16 + 256<<20 }

// rootLayoutProblem says why the guest's growpart and resize_rootfs
// cannot grow root filesystem fs to a larger root disk, or "" when they
// can: an ext4 or XFS filesystem on a partition (or the whole disk) of
// Barn's root disk, and no partition after it.
func rootLayoutProblem(fs RootFS) string {
	switch {
	case !growableFS[fs.FSType]:
		return fmt.Sprintf("the root filesystem is of type %s; Barn grows only ext4 and XFS roots", orUnknown(fs.FSType))
	case fs.DevType != "part" && fs.DevType != "disk":
		return fmt.Sprintf("the root filesystem is on a block device of type %s; growpart grows only a plain partition (not LVM, device-mapper or md)", orUnknown(fs.DevType))
	case fs.DiskSerial != qemu.RootDiskSerial:
		return fmt.Sprintf("the root filesystem is on disk %s, not on Barn's root disk (serial %s)", orUnknown(fs.Disk), qemu.RootDiskSerial)
	case !fs.Last:
		return fmt.Sprintf("the root partition is not the last one on the root disk %s; growpart grows only the last", fs.Disk)
	}
	return ""
}

// rootGrowthProblem says how root filesystem fs, on a layout Barn grows
// (rootLayoutProblem), falls short of filling a root disk of diskBytes,
// or "" when it fills it: its partition ends within partitionSlack of the disk's end (a
// disk larger than diskBytes, as an interrupted resize leaves it, is
// fine) and the filesystem within filesystemSlack of its partition.
func rootGrowthProblem(fs RootFS, diskBytes int64) string {
	if end := fs.PartStart + fs.PartBytes; diskBytes-end > partitionSlack {
		return fmt.Sprintf("the root partition ends at byte %d of the %d-byte root disk; growpart did not grow it", end, diskBytes)
	}
	if fs.PartBytes-fs.SizeBytes > filesystemSlack(fs.PartBytes) {
		return fmt.Sprintf("the root filesystem is %d bytes on its %d-byte partition; resize_rootfs did not grow it", fs.SizeBytes, fs.PartBytes)
	}
	return ""
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// checkRootLayout refuses, before anything stops, to grow the root disk
// of running node c whose root the guest cannot grow at boot (conflict,
// root_layout_unsupported; see rootLayoutProblem). Without a probe (no
// readiness) or for a node not running, nothing can be read and nothing
// is refused: its next start verifies the growth (verifyRoot). The hint
// keeps vm_disk, or runs recreate (c's recreate with the plan's
// selection and overrides), which gives a new root disk of the new size.
func (m *Manager) checkRootLayout(ctx context.Context, c *state.Node, recreate string) error {
	if m.Probe == nil || c.Phase != state.Running {
		return nil
	}
	fs, err := m.Probe.RootFS(ctx, c)
	if err != nil {
		return err
	}
	if p := rootLayoutProblem(fs); p != "" {
		return exitcode.New(exitcode.Conflict, "%s: %s (%s on %s, %s)", c.Node, p, fs.FSType, fs.Source, fs.DevType).
			WithReason("root_layout_unsupported").WithNext("keep vm_disk of " + c.Node + " at " + vmDiskValue(c.Spec.RootDiskBytes) + "; or discard the root disk for a new one of the new size: " + recreate)
	}
	return nil
}

// verifyRoot proves, once node n was launched and its guest is ready,
// that the guest's growpart and resize_rootfs grew its root partition and
// filesystem to n's committed root disk (runtime, root_not_grown; see
// rootGrowthProblem). Every such start verifies, so a root disk grown
// while the node was stopped, or by a resize interrupted before its
// start, is verified at the next start without any record of the growth.
// What cannot be verified is a warning on nr, not a failed start: a probe
// that failed (the guest lacks findmnt or lsblk), or a root Barn never
// grows (rootLayoutProblem: resize refuses to grow it while it runs).
// Without a probe or readiness nothing is read.
func (m *Manager) verifyRoot(ctx context.Context, n *state.Node, ready bool, nr *NodeResult) error {
	if m.Probe == nil || !ready {
		return nil
	}
	unverified := func(why string) {
		nr.Warnings = append(nr.Warnings, Warning{Stage: "verify", Detail: "the root disk's growth was not verified: " + why})
	}
	fs, err := m.Probe.RootFS(ctx, n)
	if err != nil {
		unverified(err.Error())
		return nil
	}
	if p := rootLayoutProblem(fs); p != "" {
		unverified(p)
		return nil
	}
	if p := rootGrowthProblem(fs, n.Spec.RootDiskBytes); p != "" {
		return exitcode.New(exitcode.Runtime, "%s: %s (%s on %s; root disk %d bytes)", n.Node, p, fs.FSType, fs.Source, n.Spec.RootDiskBytes).
			WithReason("root_not_grown").WithNext("barn-node logs " + n.Node)
	}
	m.logf("%s: root filesystem %s fills its %d-byte root disk (%d bytes)", n.Node, fs.FSType, n.Spec.RootDiskBytes, fs.SizeBytes)
	return nil
}
