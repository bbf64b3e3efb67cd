package hostnet

import (
	"path/filepath"
	"syscall"
	"testing"
)

// overlayEtc overlays /etc with a temporary upper layer under dir, in this
// (private) mount namespace only, and removes the overlay when t ends.
func overlayEtc(t *testing.T, dir string) {
	if err := syscall.Mount("overlay", "/etc", "overlay", 0,
		"lowerdir=/etc,upperdir="+filepath.Join(dir, "upper")+",workdir="+filepath.Join(dir, "work")); err != nil {
		t.Fatalf("overlay over /etc in the private mount namespace: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount("/etc", syscall.MNT_DETACH) })
}
