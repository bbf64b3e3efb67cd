package imagecache

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/imageref"
)

// TestVerifyCachedRefusesAnotherUsersFile: read-only bits prove nothing
// about a file someone else owns (its owner can chmod it back and rewrite
// it), so a cached base must be this user's: the same bytes that verify
// as the user's own are refused once they belong to another uid. Changing
// the owner needs root (.ci runs as root).
func TestVerifyCachedRefusesAnotherUsersFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another uid needs root")
	}
	p := filepath.Join(t.TempDir(), "base.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", p, "16M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v %s", err, out)
	}
	if err := os.Chmod(p, 0o444); err != nil {
		t.Fatal(err)
	}
	m, err := MeasureFile(p)
	if err != nil {
		t.Fatal(err)
	}
	id := imageref.Identity{Image: "t1", Version: "1", Arch: "amd64", File: "base.qcow2", SHA256: m.SHA256, SizeBytes: m.SizeBytes}
	if err := VerifyCached(p, id); err != nil {
		t.Fatalf("the user's own read-only file: %v", err)
	}
	if err := os.Chown(p, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if e := exitcode.As(VerifyCached(p, id)); e == nil || e.Class != exitcode.Integrity || e.Reason != "unsafe_image_file" {
		t.Fatalf("a file owned by uid 65534: %v, want integrity unsafe_image_file", e)
	}
}
