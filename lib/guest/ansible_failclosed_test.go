package guest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestAnsibleExportFailsClosed: an export cut anywhere — inside a host's
// line, between lines, down to nothing, as a failed or interrupted
// `barn-node ssh-config --ansible > FILE` leaves it — never lets the run
// its header documents reach a host without all of Barn's connection
// variables: the real ansible either fails loudly naming the file, or
// targets only hosts whose line is whole. Without the header's
// ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED=1, Ansible would skip a
// broken export with a warning and exit 0.
func TestAnsibleExportFailsClosed(t *testing.T) {
	requireAnsible(t, "ansible")
	dir := t.TempDir()
	var hosts []AnsibleHost
	var pigsty strings.Builder
	pigsty.WriteString("all:\n  children:\n")
	for i := 0; i < 3; i++ {
		addr := fmt.Sprintf("10.10.10.%d", 10+i)
		hosts = append(hosts, AnsibleHost{Address: addr, User: "dba", IdentityFile: "/k/id", KnownHosts: "/k/kh", HostKeyAlias: fmt.Sprint("barn-", i)})
		fmt.Fprintf(&pigsty, "    pg-%d:\n      hosts:\n        %s: { pg_seq: 1 }\n", i, addr)
	}
	if err := os.WriteFile(filepath.Join(dir, "pigsty.yml"), []byte(pigsty.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	full, err := RenderAnsibleInventory(hosts)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "none.cfg"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	env, args := documentedRun(t, string(full))
	run := func(export string, env []string) (int, []string, string) {
		f := filepath.Join(dir, "cut.yml")
		if err := os.WriteFile(f, []byte(export), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("ansible", append(args, "--list-hosts")...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), append([]string{"HOME=" + dir, "ANSIBLE_LOCAL_TEMP=" + filepath.Join(dir, "tmp"), "ANSIBLE_NOCOLOR=1", "ANSIBLE_CONFIG=" + filepath.Join(dir, "none.cfg")}, env...)...)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, regexp.MustCompile(`(?m)^\s+(10\.10\.10\.\d+)$`).FindAllString(string(out), -1), string(out)
	}
	if code, listed, out := run(string(full), env); code != 0 || len(listed) != len(hosts) {
		t.Fatalf("the whole export: exit %d, hosts %v\n%s", code, listed, out)
	}
	cuts := []int{0} // nothing at all, and every line end after the header's comment
	for i, c := range full {
		if c == '\n' && (i+1 == len(full) || full[i+1] != '#') {
			cuts = append(cuts, i+1)
		}
	}
	for _, h := range []AnsibleHost{hosts[0], hosts[len(hosts)-1]} {
		line := strings.Index(string(full), `"`+h.Address+`": {`)
		cuts = append(cuts, line+len(h.Address)+4, line+200) // inside the host's line
	}
	for _, n := range cuts {
		cut := string(full[:n])
		code, listed, out := run(cut, env)
		if code != 0 {
			if !strings.Contains(out, "cut.yml") {
				t.Errorf("cut at %d: exit %d without naming the file:\n%s", n, code, out)
			}
			continue
		}
		for _, l := range listed {
			addr := strings.TrimSpace(l)
			if i := strings.Index(string(full), `"`+addr+`": {`); i < 0 || !strings.Contains(cut, string(full[i:i+strings.IndexByte(string(full[i:]), '\n')+1])) {
				t.Errorf("cut at %d: ansible targets %s, whose line the file lacks:\n%s", n, addr, cut)
			}
		}
		if !strings.HasSuffix(cut, "\n") && n > 0 {
			t.Errorf("cut at %d inside a line: ansible exits 0:\n%s", n, out)
		}
	}
	// the setting is what makes a broken export fatal
	line := strings.Index(string(full), `"10.10.10.11": {`)
	if code, _, out := run(string(full[:line+30]), nil); code != 0 {
		t.Errorf("without %s a broken export fails too (exit %d): the test no longer shows why the header sets it\n%s", AnsibleUnparsedFatal, code, out)
	}
}

// documentedRun is the ad-hoc command of the export's header: its
// environment and ansible's arguments, with THIS_FILE as cut.yml.
func documentedRun(t *testing.T, export string) (env, args []string) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^#\s+((?:[A-Z_]+=\S+ )*)ansible (.*)$`).FindStringSubmatch(export)
	if m == nil {
		t.Fatalf("no ansible command in the export's header:\n%s", export)
	}
	env = strings.Fields(m[1])
	args = strings.Fields(strings.ReplaceAll(m[2], "THIS_FILE", "cut.yml"))
	if len(env) == 0 || !strings.Contains(m[2], "-i pigsty.yml -i THIS_FILE "+AnsibleGroup) {
		t.Fatalf("the header's command sets no environment or targets no %s: %s", AnsibleGroup, m[0])
	}
	return env, args
}
