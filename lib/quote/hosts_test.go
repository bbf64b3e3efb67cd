package quote

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestHostsLineIsReadByGetent: glibc's resolver, reading a hosts file of
// HostsLine lines bind-mounted over /etc/hosts in a private mount
// namespace, maps every name (canonical and aliases) to its address.
func TestHostsLineIsReadByGetent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a private mount namespace needs root")
	}
	entries := []struct {
		addr  string
		names []string
	}{
		{"10.10.10.10", []string{"meta", "pg-meta-1", "infra.pigsty"}},
		{"10.10.10.11", []string{"pg-test-1", "PG-Test-1.Example.COM"}},
		{"192.168.3.4", []string{"a"}},
	}
	var b strings.Builder
	b.WriteString("127.0.0.1\tlocalhost\n")
	for _, e := range entries {
		l, err := HostsLine(e.addr, e.names)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(l + "\n")
	}
	file := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		for _, n := range e.names {
			out, err := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-ec",
				`mount --bind "$1" /etc/hosts; getent ahostsv4 "$2" | head -1`, "sh", file, n).CombinedOutput()
			if err != nil {
				t.Fatalf("getent %s: %v: %s", n, err, out)
			}
			if f := strings.Fields(string(out)); len(f) == 0 || f[0] != e.addr {
				t.Errorf("getent ahostsv4 %s = %q, want %s", n, out, e.addr)
			}
		}
	}
	for _, bad := range []struct {
		addr  string
		names []string
	}{
		{"10.10.10.1", []string{"a b"}}, {"10.10.10.1", []string{"#c"}}, {"10.10.10.1", []string{"x\ny"}},
		{"10.10.10.1", []string{"under_score"}}, {"10.10.10.1", []string{"-lead"}}, {"10.10.10.1", []string{""}},
		{"10.10.10.1", []string{strings.Repeat("a", 64)}}, {"10.10.10.1", nil},
		{"10.10.10", []string{"a"}}, {"::1", []string{"a"}}, {"10.10.10.1 x", []string{"a"}},
	} {
		if _, err := HostsLine(bad.addr, bad.names); !isRefusal(err) {
			t.Errorf("HostsLine(%q, %q) = %v, want a refusal", bad.addr, bad.names, err)
		}
	}
}
