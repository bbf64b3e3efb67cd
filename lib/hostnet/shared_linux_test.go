package hostnet

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A POSIX ACL grants nobody read-write on a root-only 0600 device: the
// kernel lets nobody open it, so install does not refuse.
func TestTunThroughAnACLIsAccepted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("judging another user's access runs a child as that user: root only")
	}
	tun := filepath.Join(t.TempDir(), "tun")
	must(t, os.WriteFile(tun, nil, 0o600))
	must(t, os.Chmod(filepath.Dir(tun), 0o755))
	must(t, os.Chmod(filepath.Dir(filepath.Dir(tun)), 0o755))
	// system.posix_acl_access, version 2: user::rw- user:65534:rw- group::--- mask::rw- other::---
	ent := func(tag, perm uint16, id uint32) []byte {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint16(b, tag)
		binary.LittleEndian.PutUint16(b[2:], perm)
		binary.LittleEndian.PutUint32(b[4:], id)
		return b
	}
	acl := []byte{2, 0, 0, 0}
	for _, e := range [][]byte{ent(1, 6, ^uint32(0)), ent(2, 6, 65534), ent(4, 0, ^uint32(0)), ent(0x10, 6, ^uint32(0)), ent(0x20, 0, ^uint32(0))} {
		acl = append(acl, e...)
	}
	if err := syscall.Setxattr(tun, "system.posix_acl_access", acl, 0); err != nil {
		t.Fatalf("setting a POSIX ACL on %s: %v", tun, err)
	}
	h := &Host{Tun: tun}
	if why := h.tunDenied(65534, 65534, []uint32{}); why != "" {
		t.Fatalf("refused though the ACL grants uid 65534: %s", why)
	}
	must(t, syscall.Removexattr(tun, "system.posix_acl_access"))
	must(t, os.Chmod(tun, 0o600))
	if why := h.tunDenied(65534, 65534, []uint32{}); why == "" {
		t.Fatal("not refused without the ACL")
	}
}

// A 0666 TUN node on a nodev mount: the permission bits allow it, the
// kernel does not (open fails EACCES), so install refuses.
func TestLiveTunOnANodevMountIsRefused(t *testing.T) {
	live(t, func(t *testing.T, e *liveEnv) {
		dev := filepath.Join(e.dir, "dev")
		must(t, os.Mkdir(dev, 0o755))
		sh(t, "mount", "-t", "tmpfs", "-o", "mode=0755,nodev", "none", dev)
		t.Cleanup(func() { _ = exec.Command("umount", dev).Run() })
		tun := filepath.Join(dev, "tun")
		sh(t, "mknod", "-m", "0666", tun, "c", "10", "200")
		h := &Host{Tun: tun}
		if why := h.tunDenied(65534, 65534, []uint32{}); !strings.Contains(why, "Permission denied") {
			t.Fatalf("nodev: %q, want a refusal", why)
		}
	})
}
