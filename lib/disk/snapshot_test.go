package disk

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"barn.dev/lib/exitcode"
)

// TestInternalSnapshots runs real qemu-img on an overlay whose base has
// been moved away: create, list, apply and delete never open the backing
// file, delete is idempotent, and applying a missing tag is named.
func TestInternalSnapshots(t *testing.T) {
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img not installed")
	}
	ctx := context.Background()
	dir := t.TempDir()
	base, ov := filepath.Join(dir, "base.qcow2"), filepath.Join(dir, "ov.qcow2")
	for _, args := range [][]string{{"create", "-q", "-f", "qcow2", base, "1M"}, {"create", "-q", "-f", "qcow2", "-b", base, "-F", "qcow2", ov}} {
		if out, err := exec.Command("qemu-img", args...).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img %v: %v %s", args, err, out)
		}
	}
	if err := os.Rename(base, base+".moved"); err != nil {
		t.Fatal(err)
	}
	var tool Tool
	if err := tool.CreateSnapshot(ctx, ov, "barn-a"); err != nil {
		t.Fatal(err)
	}
	if err := tool.CreateSnapshot(ctx, ov, "barn-a"); err != nil {
		t.Fatalf("second create of the same tag: %v", err)
	}
	snaps, err := tool.Snapshots(ctx, ov)
	if err != nil || len(snaps) != 1 || snaps[0].Name != "barn-a" {
		t.Fatalf("snapshots = %+v, %v", snaps, err)
	}
	if err := tool.ApplySnapshot(ctx, ov, "barn-a"); err != nil {
		t.Fatal(err)
	}
	err = tool.ApplySnapshot(ctx, ov, "barn-b")
	if e := exitcode.As(err); e == nil || e.Reason != "snapshot_missing" {
		t.Fatalf("apply of a missing tag: %v", err)
	}
	for i := 0; i < 2; i++ {
		if err := tool.DeleteSnapshot(ctx, ov, "barn-a"); err != nil {
			t.Fatalf("delete %d: %v", i, err)
		}
	}
	if ok, err := tool.HasSnapshot(ctx, ov, "barn-a"); err != nil || ok {
		t.Fatalf("after delete: %v %v", ok, err)
	}
}
