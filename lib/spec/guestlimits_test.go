package spec

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGuestLimits: each value Barn hands the guest is checked against the
// limit of the program that consumes it, at the limit and one past it.
func TestGuestLimits(t *testing.T) {
	fqdn := func(n int) string { return "a." + strings.Repeat("b", n-2) } // n bytes, labels ≤ 63
	for _, c := range []struct {
		name string
		v    *Violation
		ok   bool
	}{
		{"hostname FQDN of 64 bytes", CheckFQDN("a", fqdn(64)), true},
		{"hostname FQDN of 65 bytes", CheckFQDN("a", fqdn(65)), false},
		{"user name of 32 bytes", CheckUserName(strings.Repeat("u", 32)), true},
		{"user name of 33 bytes", CheckUserName(strings.Repeat("u", 33)), false},
		{"user name that is a guest group", CheckUserName("staff"), false},
		{"user name sudo", CheckUserName("sudo"), false},
		{"user name admin (no such group in Debian)", CheckUserName("admin"), true},
		{"xfs disk of 300 MiB", CheckDataDiskFits(MinXFSBytes, "xfs"), true},
		{"xfs disk of 299 MiB", CheckDataDiskFits(299<<20, "xfs"), false},
		{"auto disk of 64 MiB (xfs in the guest)", CheckDataDiskFits(64<<20, "auto"), false},
		{"ext4 disk of 64 MiB", CheckDataDiskFits(64<<20, "ext4"), true},
		{"ext4 disk of 512 KiB", CheckDataDiskFits(512<<10, "ext4"), false},
		{"mount path whose unit name is 255 bytes", CheckGuestPath("/" + strings.Repeat("a", 249)), true},
		{"mount path whose unit name is 256 bytes", CheckGuestPath("/" + strings.Repeat("a", 250)), false},
		{"mount path of dashes, escaped 4 bytes each", CheckGuestPath("/a" + strings.Repeat("-", 70)), false},
	} {
		if (c.v == nil) != c.ok {
			t.Errorf("%s: violation %v, want ok=%v", c.name, c.v, c.ok)
		}
		if c.v != nil && c.v.Hint == "" {
			t.Errorf("%s: violation %q has no hint", c.name, c.v.Problem)
		}
	}
}

// TestMountUnitIsSystemdEscape: MountUnit equals systemd-escape --path
// --suffix=mount on generated guest paths.
func TestMountUnitIsSystemdEscape(t *testing.T) {
	tool, err := exec.LookPath("systemd-escape")
	if err != nil {
		t.Skip("systemd-escape is not installed: " + err.Error())
	}
	r := rand.New(rand.NewPCG(20, 7))
	const alphabet = "abcXYZ019._-/"
	var paths []string
	for len(paths) < 200 {
		b := []byte{'/'}
		for i := 0; i < 1+r.IntN(24); i++ {
			b = append(b, alphabet[r.IntN(len(alphabet))])
		}
		if p := string(b); CleanAbs(p) {
			paths = append(paths, p)
		}
	}
	paths = append(paths, "/data", "/pg/data", "/.hidden", "/a.b/-c_")
	out, err := exec.Command(tool, append([]string{"--path", "--suffix=mount"}, paths...)...).Output()
	if err != nil {
		t.Fatalf("systemd-escape: %v", err)
	}
	units := strings.Fields(string(out))
	if len(units) != len(paths) {
		t.Fatalf("systemd-escape printed %d names for %d paths", len(units), len(paths))
	}
	for i, u := range units {
		if got := MountUnit(paths[i]); got != u {
			t.Errorf("MountUnit(%q) = %q, systemd-escape says %q", paths[i], got, u)
		}
	}
}

// TestSystemGroupsCoverBasePasswd: every static group of this host's
// base-passwd (the list Debian guests start from) is in SystemGroups.
func TestSystemGroupsCoverBasePasswd(t *testing.T) {
	b, err := os.ReadFile("/usr/share/base-passwd/group.master")
	if err != nil {
		t.Skip("base-passwd is not installed: " + err.Error())
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		name, _, _ := strings.Cut(line, ":")
		if CheckUserName(name) == nil && name != DbaUser {
			t.Errorf("base-passwd group %s is accepted as a login user name", name)
		}
	}
}

// TestDataDiskLimitsAreMkfs: the real mkfs.xfs makes a filesystem of
// MinXFSBytes and refuses 1 MiB less; the real mkfs.ext4 makes one of
// MinExt4Bytes.
func TestDataDiskLimitsAreMkfs(t *testing.T) {
	dir := t.TempDir()
	mkfs := func(tool string, size int64, args ...string) error {
		bin, err := exec.LookPath(tool)
		if err != nil {
			t.Skip(tool + " is not installed")
		}
		img := filepath.Join(dir, fmt.Sprintf("%s-%d.img", tool, size))
		if err := os.WriteFile(img, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(img, size); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(img)
		out, err := exec.Command(bin, append(args, img)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	if err := mkfs("mkfs.xfs", MinXFSBytes, "-q", "-f"); err != nil {
		t.Errorf("mkfs.xfs refuses MinXFSBytes: %v", err)
	}
	if err := mkfs("mkfs.xfs", MinXFSBytes-1<<20, "-q", "-f"); err == nil {
		t.Errorf("mkfs.xfs takes %d bytes: MinXFSBytes is not its limit", MinXFSBytes-1<<20)
	}
	if err := mkfs("mkfs.ext4", MinExt4Bytes, "-q", "-F"); err != nil {
		t.Errorf("mkfs.ext4 refuses MinExt4Bytes: %v", err)
	}
}
