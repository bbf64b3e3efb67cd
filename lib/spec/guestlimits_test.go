package spec

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// TestAliasAddressRuleIsInetAton: on generated aliases, CheckAlias refuses
// every name glibc's inet_aton(3) reads as an IPv4 address (asked through
// Python's socket.inet_aton, which calls it) and every name whose last
// label is all digits, and accepts every other name with a label that is
// a word (a name of numbers only is refused even when out of range);
// loopback names are refused too.
var numericLabel = regexp.MustCompile(`^(0x[0-9a-z]*|[0-9]+)$`)

func TestAliasAddressRuleIsInetAton(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 (glibc's inet_aton) not installed")
	}
	rng := rand.New(rand.NewPCG(25, 20))
	parts := []string{"0", "1", "10", "255", "256", "4294967295", "0x", "0xa", "0xff", "07", "08", "a", "pg", "1a", "x0", "0x1g"}
	var names []string
	for len(names) < 2000 {
		n := 1 + rng.IntN(5)
		var ls []string
		for range n {
			ls = append(ls, parts[rng.IntN(len(parts))])
		}
		s := strings.Join(ls, ".")
		if CheckAlias(s) != nil && !aliasRE.MatchString(s) {
			continue
		}
		names = append(names, s)
	}
	cmd := exec.Command(py, "-c", `import socket,sys
for l in sys.stdin:
    try:
        socket.inet_aton(l.strip()); print(1)
    except OSError:
        print(0)`)
	cmd.Stdin = strings.NewReader(strings.Join(names, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	verdicts := strings.Fields(string(out))
	if len(verdicts) != len(names) {
		t.Fatalf("%d verdicts for %d names", len(verdicts), len(names))
	}
	refused := 0
	for i, s := range names {
		labels := strings.Split(s, ".")
		must := verdicts[i] == "1" || strings.Trim(labels[len(labels)-1], "0123456789") == ""
		named := false // some label is a word, not a number in any base
		for _, l := range labels {
			named = named || !numericLabel.MatchString(l)
		}
		got := CheckAlias(s) != nil
		if must && !got || got && named && !must {
			t.Errorf("alias %q: refused %v (inet_aton reads it: %s)", s, got, verdicts[i])
		}
		if must {
			refused++
		}
	}
	if refused == 0 || refused == len(names) {
		t.Fatalf("generated %d names, %d read as addresses: the generator proves nothing", len(names), refused)
	}
	for _, s := range []string{"localhost", "ip6-loopback", "pg.localhost"} {
		if CheckAlias(s) == nil {
			t.Errorf("alias %q accepted", s)
		}
	}
}
