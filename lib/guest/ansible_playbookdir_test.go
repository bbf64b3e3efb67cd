package guest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"barn.dev/lib/inventory"
)

// TestAnsibleExportPlaybookDirs: Ansible also reads host_vars/ and
// group_vars/ beside the playbook (ansible-playbook) and in the working
// directory (ad-hoc ansible). Proven with the real programs: group_vars/
// there, every hostile connection value at once, and a play's
// `connection: paramiko` lose to the export (the ssh command line is the
// export's alone) and Barn refuses nothing; a host_vars/ file there
// outranks the export, and Barn's check of that directory
// (inventory.BesideDirs, what `--playbook-dir` and the working directory
// feed) refuses it with its file and line.
func TestAnsibleExportPlaybookDirs(t *testing.T) {
	if testing.Short() {
		t.Skip("real ansible-playbook runs: not in -short runs")
	}
	requireAnsible(t, "ansible", "ansible-playbook", "ansible-inventory")
	l := newLab(t, 1)
	base := l.baseline(t)[l.hosts[0]]
	pb, cwd := filepath.Join(l.dir, "pb"), filepath.Join(l.dir, "cwd")
	var all strings.Builder
	for _, h := range hostileConnection {
		all.WriteString(h.key + ": " + h.yaml + "\n")
	}
	files := map[string]string{
		"pb/play.yml":            "- hosts: all\n  gather_facts: false\n  connection: paramiko\n  tasks:\n    - ping:\n",
		"pb/group_vars/all.yml":  all.String(),
		"pb/group_vars/g0.yml":   all.String(),
		"cwd/group_vars/all.yml": all.String(),
		"cwd/host_vars/.keep":    "",
		"pb/host_vars/.keep":     "",
	}
	for name, text := range files {
		p := filepath.Join(l.dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in, err := inventory.Open(filepath.Join(l.dir, "inv", "pigsty.yml"))
	if err != nil {
		t.Fatal(err)
	}
	refused := func(dir string) []inventory.Problem {
		var out []inventory.Problem
		for _, at := range inventory.BesideDirs(in, []string{dir}) {
			over, err := inventory.ConnectionOverrides(at, l.hosts, AnsibleDecidingVars())
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, over...)
		}
		return out
	}
	inv := []string{"-i", filepath.Join(l.dir, "inv", "pigsty.yml"), "-i", filepath.Join(l.dir, "inv", "barn.yml")}
	playbook := func() string { return l.run(t, pb, "ansible-playbook", append(inv, "play.yml")...) }
	adhoc := func() string { return l.run(t, cwd, "ansible", append(inv, "all", "-m", "ping", "-o")...) }
	for _, c := range []struct {
		name, dir string
		run       func() string
	}{{"playbook", pb, playbook}, {"working directory", cwd, adhoc}} {
		if got := c.run(); got != base {
			t.Errorf("%s: group_vars/ there changed Ansible's ssh command line:\n%s\nwhere the export alone runs\n%s", c.name, got, base)
		}
		if r := refused(c.dir); len(r) > 0 {
			t.Errorf("%s: Barn refuses %+v, but group_vars/ lose to the export", c.name, r)
		}
		hv := filepath.Join(c.dir, "host_vars", l.hosts[0]+".yml")
		if err := os.WriteFile(hv, []byte("# production\nansible_ssh_common_args: \"-o ProxyJump=admin@bastion\"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := c.run(); got == base || !strings.Contains(got, "ProxyJump=admin@bastion") {
			t.Errorf("%s: Ansible ignored %s (the test shows nothing):\n%s", c.name, hv, got)
		}
		r := refused(c.dir)
		if len(r) != 1 || r[0].File != hv || r[0].Line != 2 || r[0].Key != "ansible_ssh_common_args" {
			t.Errorf("%s: Barn refuses %+v, want %s:2 ansible_ssh_common_args", c.name, r, hv)
		}
		_ = os.Remove(hv)
	}
}

// run runs an Ansible program in dir and returns the host's ssh command
// line, as lab.ping does.
func (l *lab) run(t *testing.T, dir, prog string, args ...string) string {
	t.Helper()
	_ = os.RemoveAll(l.log)
	_ = os.MkdirAll(l.log, 0o755)
	cmd := exec.Command(prog, args...)
	cmd.Dir, cmd.Env = dir, l.env
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 2 && ee.ExitCode() != 4) {
		t.Fatalf("%s: %v\n%s", prog, err, out)
	}
	b, _ := os.ReadFile(filepath.Join(l.log, "100"))
	return string(b)
}
