package inventory

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/testexec"
)

// writeTree writes files (path → content; content "->target" makes a
// symlink, "x:" before the content an executable file) under a new
// temporary directory and returns it.
func writeTree(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if target, ok := strings.CutPrefix(content, "->"); ok {
			err = os.Symlink(target, full)
		} else if script, ok := strings.CutPrefix(content, "x:"); ok {
			err = testexec.WriteScript(full, []byte(script))
		} else {
			err = os.WriteFile(full, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestAnsibleIssue24Cases: each numbered case of issue 24, with Ansible's
// answer asserted against ansible-inventory and Barn's against it.
func TestAnsibleIssue24Cases(t *testing.T) {
	ans := needAnsible(t)
	meta := "  children: { pg-meta: { hosts: { 10.10.10.10: {} } } }\n"
	fails := []struct {
		name  string
		files map[string]string
		file  string // the file Barn's refusal names
		line  int
		value string
		says  string // Ansible's error, as Barn states it
	}{
		{"1 date inline", map[string]string{"pigsty.yml": "all:\n  vars: { pg_backup_since: 2024-02-30 }\n" + meta}, "pigsty.yml", 2, "2024-02-30", "day is out of range for month"},
		{"1 date in group_vars/all.yml", map[string]string{"pigsty.yml": "all:\n" + meta, "group_vars/all.yml": "pg_backup_since: 2024-02-30\n"}, "group_vars/all.yml", 1, "2024-02-30", "day is out of range for month"},
		{"1 !!int abc", map[string]string{"pigsty.yml": "all:\n  vars: { pg_note: !!int \"abc\" }\n" + meta}, "pigsty.yml", 2, "abc", "int() fails on it"},
		{"1 !!bool maybe", map[string]string{"pigsty.yml": "all:\n  vars: { pg_note: !!bool maybe }\n" + meta}, "pigsty.yml", 2, "maybe", "only yes, no, true, false, on and off"},
		{"2 empty step", map[string]string{"pigsty.yml": "all:\n  children: { pg-meta: { hosts: { \"10.10.10.[11:13:]\": {} } } }\n"}, "pigsty.yml", 2, "", `int() cannot read ""`},
	}
	for _, c := range fails {
		dir := writeTree(t, c.files)
		path := filepath.Join(dir, "pigsty.yml")
		theirs, err := ans.list(path)
		if err != nil {
			t.Fatal(err)
		}
		if theirs.OK {
			t.Errorf("case %s: Ansible reads it; the case expects Ansible to fail", c.name)
		}
		in, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = ResolveInput(in)
		ps := Problems(err)
		if len(ps) == 0 {
			t.Errorf("case %s: Ansible fails (%.200s) but Barn resolves it", c.name, theirs.Error)
			continue
		}
		p := ps[0]
		if p.File != filepath.Join(dir, c.file) || p.Line != c.line || p.Value != c.value || !strings.Contains(p.String(), c.says) {
			t.Errorf("case %s: Barn's refusal %s; want %s:%d, value %q, saying %q", c.name, p, c.file, c.line, c.value, c.says)
		}
	}

	t.Run("3 symlinked inventory", func(t *testing.T) {
		dir := writeTree(t, map[string]string{
			"conf/dev.yml":            "all:\n" + meta,
			"conf/group_vars/all.yml": "vm_cpu: 2\n",
			"group_vars/all.yml":      "vm_cpu: 4\n",
			"pigsty.yml":              "->conf/dev.yml",
		})
		path := filepath.Join(dir, "pigsty.yml")
		theirs, err := ans.list(path)
		if err != nil || !theirs.OK {
			t.Fatalf("Ansible: %v %s", err, theirs.Error)
		}
		if v := theirs.Hostvars["10.10.10.10"]["vm_cpu"]; v != 4.0 {
			t.Fatalf("Ansible's vm_cpu is %v; the case expects 4", v)
		}
		if s := resolveFile(t, path); s.Nodes[0].CPUs != 4 {
			t.Errorf("Barn builds %d CPUs; Ansible reads vm_cpu 4", s.Nodes[0].CPUs)
		}
	})

	t.Run("4 refused priority spelling in a tie", func(t *testing.T) {
		dir := writeTree(t, map[string]string{"pigsty.yml": `all:
  children:
    a: { vars: { ansible_group_priority: 0x10, vm_cpu: 4 }, hosts: { 10.10.10.10: {} } }
    b: { vars: { vm_cpu: 2 }, hosts: { 10.10.10.10: {} } }
    c: { vars: { vm_cpu: 8 }, hosts: { 10.10.10.10: {} } }
`})
		path := filepath.Join(dir, "pigsty.yml")
		theirs, err := ans.list(path)
		if err != nil || !theirs.OK {
			t.Fatalf("Ansible: %v %s", err, theirs.Error)
		}
		if v := theirs.Hostvars["10.10.10.10"]["vm_cpu"]; v != 4.0 {
			t.Fatalf("Ansible's vm_cpu is %v; the case expects 4 (group a at priority 16)", v)
		}
		in, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		vars, err := HostVars(in)
		if got := vars["10.10.10.10"]["vm_cpu"]; got != int64(4) {
			t.Errorf("Barn resolves vm_cpu %v; Ansible 4", got)
		}
		ps := Problems(err)
		if len(ps) != 1 || ps[0].Key != "ansible_group_priority" || ps[0].Ansible == nil || ps[0].Ansible.Value != int64(16) {
			t.Fatalf("problems %v; want one refusal of 0x10 stating Ansible's priority 16", ps)
		}
		if !strings.Contains(ps[0].Message, "16") {
			t.Errorf("the refusal does not state Ansible's priority 16: %s", ps[0])
		}
	})
}

// TestYAMLDirective12: libyaml (and so Ansible) accepts %YAML 1.2 and
// reads the document with YAML 1.1 rules; Barn too (yes is a boolean).
func TestYAMLDirective12(t *testing.T) {
	in := Bytes([]byte("# lab\n%YAML 1.2\n---\nall:\n  vars: {pg_flag: yes}\n  hosts: {10.10.10.10: {vm_cpu: 3}}\n"), "pigsty.yml")
	s, _, err := ResolveInput(in)
	if err != nil || s.Nodes[0].CPUs != 3 {
		t.Fatalf("%v", err)
	}
	if _, _, err := Resolve([]byte("%YAML 1.3\n---\nall: {hosts: {10.10.10.10: {}}}\n"), "x.yml"); err == nil {
		t.Fatal("%YAML 1.3 is read; libyaml refuses it")
	}
}

// TestLoaderMatchesPyYAML: scalars PyYAML constructs pass, the ones it
// cannot build fail the file (each verified against ansible-inventory).
func TestLoaderMatchesPyYAML(t *testing.T) {
	good := []string{"2024-02-29", "2024-02-01T10:00:00+23:59", `!!int " 12"`, "!!int 0o17", `!!float "1"`, `!!bool "TRUE"`, "!!null x",
		"!!omap [a: 1]", `!unsafe "{{ x }}"`, "{=: 1}", "{1: a}", "0_", "&a {<<: *a}"}
	bad := []string{"2024-02-30", "0000-01-01", "2024-02-01 24:00:00", "2024-02-01T10:00:00+24:00", `!!int "abc"`, "!!int 08", `!!int ""`,
		"!!float abc", "!!bool maybe", "!!timestamp abc", "!!str {a: 1}", "!!map x", "!!null [a]", "!!set {a: null}", "!!binary aGk=",
		"!custom x", "=", "0b_", "&a [*a]", "{? [a] : b}", "{<<: 5}"}
	for _, v := range append(good, bad...) {
		doc := "all:\n  vars: {pg_x: " + v + ", pg_y: &z 1, pg_w: *z}\n  hosts: {10.10.10.10: {}}\n"
		_, _, err := Resolve([]byte(doc), "pigsty.yml")
		isBad := false
		for _, b := range bad {
			isBad = isBad || b == v
		}
		if isBad != (err != nil) {
			t.Errorf("pg_x: %s: Barn's error %v; PyYAML fails on it: %v", v, err, isBad)
		}
	}
	if _, _, err := Resolve([]byte("all:\n  vars: {a: &x 1, b: &x 2}\n  hosts: {10.10.10.10: {}}\n"), "p.yml"); err == nil || !strings.Contains(err.Error(), "duplicate anchor") {
		t.Errorf("an anchor defined twice: %v", err)
	}
}

// TestHostVarsOfAGroupName: a host listed after a group of its name gives
// its inline variables to that group, as InventoryData.set_variable looks
// groups up first (the names generator proves it against Ansible).
func TestHostVarsOfAGroupName(t *testing.T) {
	doc := `all:
  children:
    "10.10.10.11": {vars: {pg_note: x}}
    pg-meta:
      hosts:
        10.10.10.11: {vm_cpu: 3}
`
	s, ws, err := Resolve([]byte(doc), "pigsty.yml")
	if err != nil {
		t.Fatal(err)
	}
	if s.Nodes[0].CPUs != DefaultCPUs {
		t.Errorf("the host has %d CPUs; Ansible gives vm_cpu 3 to the group 10.10.10.11, which has no hosts", s.Nodes[0].CPUs)
	}
	found := false
	for _, w := range ws {
		found = found || w.Code == "host_vars_to_group"
	}
	if !found {
		t.Errorf("no host_vars_to_group warning: %v", ws)
	}
}

// TestNextNamesTheInventory: the validate hint of a refusal whose first
// problem sits in a vars file names the inventory, never that vars file
// (read as an inventory of its own it would read something else).
func TestNextNamesTheInventory(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"pigsty.yml":         "all:\n  hosts: {10.10.10.10: {vm_cpu: 010}}\n",
		"group_vars/all.yml": "pg_a: 2024-02-30\npg_b: !!bool maybe\n",
	})
	path := filepath.Join(dir, "pigsty.yml")
	in, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = ResolveInput(in)
	e := exitcode.As(err)
	if e == nil || len(Problems(err)) < 2 || !strings.HasSuffix(Problems(err)[0].File, "all.yml") {
		t.Fatalf("want the group_vars problems first: %v", err)
	}
	if want := "barn-inventory validate -f " + path; e.Next != want {
		t.Errorf("next: %q; want %q", e.Next, want)
	}
}
