package inventory

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
)

// TestVarsFilesCase reads testdata/ansible/vars-files, which has every
// kind of vars file Ansible reads (and several it skips), in Ansible's
// order; TestAnsibleCrossCheck proves the same values against Ansible.
func TestVarsFilesCase(t *testing.T) {
	in, err := Open("testdata/ansible/vars-files/pigsty.yml")
	if err != nil {
		t.Fatal(err)
	}
	hv, err := HostVars(in)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]any{
		"10.10.10.11": {"admin_ip": "10.10.10.10", "pg_cluster": "pg-a", "pg_seq": int64(1), "vm_cpu": int64(4), "vm_disk": int64(32), "vm_mem": int64(2048)},
		"10.10.10.12": {"admin_ip": "10.10.10.10", "nodename": "pg-b-two.lab", "pg_cluster": "pg-a", "pg_seq": int64(2), "vm_cpu": int64(4), "vm_disk": int64(48),
			"vm_disks": []any{map[string]any{"path": "/data", "size": "8GiB"}}, "vm_mem": int64(4096)},
		"10.10.10.13": {"admin_ip": "10.10.10.10", "pg_cluster": "pg-b", "pg_seq": int64(3), "vm_cpu": int64(4), "vm_disk": int64(48),
			"vm_disks": []any{map[string]any{"path": "/data", "size": "8GiB"}}, "vm_mem": 1000.0},
	}
	if !reflect.DeepEqual(hv, want) {
		t.Fatalf("got  %v\nwant %v", hv, want)
	}
	// JSON's 1e3 is the float 1000.0, which is not a size.
	_, ws, err := ResolveInput(in)
	ps := Problems(err)
	if len(ps) != 1 || ps[0].File != "testdata/ansible/vars-files/group_vars/pg-b/zz.json" || ps[0].Key != "vm_mem" || ps[0].Origin != "group_vars/pg-b" {
		t.Fatalf("problems %v", ps)
	}
	var codes []string
	for _, w := range ws {
		codes = append(codes, w.Code+": "+w.Message)
	}
	if got := strings.Join(codes, "\n"); !strings.Contains(got, "vars_file_shadowed: testdata/ansible/vars-files/group_vars/all.yml is ignored") {
		t.Errorf("warnings:\n%s", got)
	}
}

// TestSourcesListEveryFileRead: the spec names the inventory and every
// vars file read, and nothing Ansible skips.
func TestSourcesListEveryFileRead(t *testing.T) {
	dir := t.TempDir()
	write := func(p, s string) {
		t.Helper()
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("pigsty.yml", "all:\n  children:\n    pg-test:\n      hosts: {10.10.10.11: {}, 10.10.10.12: {}}\n")
	write("group_vars/all/a.yml", "vm_cpu: 1\n")
	write("group_vars/all/b", "pg_version: 17\n")
	write("group_vars/pg-test.yaml", "vm_mem: 2048\n")
	write("group_vars/pg-tset.yml", "vm_mem: 4096\n")
	write("host_vars/10.10.10.12.json", `{"nodename": "two"}`)
	write("host_vars/10.10.10.99.yml", "nodename: gone\n")
	s, ws, err := ResolveInput(mustOpen(t, filepath.Join(dir, "pigsty.yml")))
	if err != nil {
		t.Fatal(err)
	}
	var rel []string
	for _, p := range s.Source {
		r, _ := filepath.Rel(dir, p)
		rel = append(rel, r)
	}
	if want := []string{"pigsty.yml", "group_vars/all/a.yml", "group_vars/all/b", "group_vars/pg-test.yaml", "host_vars/10.10.10.12.json"}; !reflect.DeepEqual(rel, want) {
		t.Errorf("sources %v, want %v", rel, want)
	}
	var unused []string
	for _, w := range ws {
		if w.Code == "unused_vars_file" {
			unused = append(unused, w.Message)
		}
	}
	if len(unused) != 2 || !strings.Contains(unused[0], "pg-tset.yml names no group") || !strings.Contains(unused[1], "10.10.10.99.yml names no host") {
		t.Errorf("unused warnings %v", unused)
	}
	if got := strings.Join(s.NodeNames(), " "); got != "node-11 two" {
		t.Errorf("nodes %s", got)
	}
}

func mustOpen(t *testing.T, p string) *Input {
	t.Helper()
	in, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// TestVarsFileRefusals: what Ansible fails on, Barn refuses, naming the
// file.
func TestVarsFileRefusals(t *testing.T) {
	inv := []byte("all:\n  hosts:\n    10.10.10.11: {}\n")
	for name, c := range map[string]struct{ path, data, want string }{
		"list":    {"group_vars/all.yml", "- vm_cpu: 1\n", "group_vars/all.yml:1:1: a vars file must hold a mapping of variables (Ansible fails on it too)"},
		"vault":   {"group_vars/all.yml", "$ANSIBLE_VAULT;1.1;AES256\n6162\n", "group_vars/all.yml: the file is encrypted with Ansible Vault"},
		"yaml":    {"host_vars/10.10.10.11.yml", "vm_cpu: [1\n", "host_vars/10.10.10.11.yml:1:1: invalid YAML"},
		"nan":     {"group_vars/all.json", `{"vm_cpu": NaN}`, "group_vars/all.json: JSON with NaN or Infinity"},
		"unknown": {"group_vars/all.yml", "vm_cpus: 2\n", "group_vars/all.yml:1:1: vm_cpus = \"2\": unknown vm_* variable (inherited from group_vars/all); did you mean vm_cpu"},
		"twodocs": {"group_vars/all.yml", "a: 1\n---\nb: 2\n", "group_vars/all.yml:2:1: a file must hold exactly one YAML document"},
	} {
		fsys := fstest.MapFS{c.path: {Data: []byte(c.data)}}
		in := &Input{Name: "pigsty.yml", Files: []File{{Path: "pigsty.yml", Data: inv}}, Vars: fsys}
		_, _, err := ResolveInput(in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	// Empty and false documents add nothing, as in Ansible.
	for _, data := range []string{"", "# nothing\n", "---\n", "{}\n", "false\n", "[]\n"} {
		in := &Input{Name: "pigsty.yml", Files: []File{{Path: "pigsty.yml", Data: inv}}, Vars: fstest.MapFS{"group_vars/all.yml": {Data: []byte(data)}}}
		if _, _, err := ResolveInput(in); err != nil {
			t.Errorf("%q: %v", data, err)
		}
	}
}

// TestEmptyDirectoryInventory: a directory whose files hold only comments
// is an empty inventory, refused like an empty file.
func TestEmptyDirectoryInventory(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a.yml", "b.yml"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("# nothing yet\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err := ResolveInput(mustOpen(t, dir))
	if err == nil || !strings.Contains(err.Error(), "the inventory is empty") {
		t.Fatalf("%v", err)
	}
}

// TestWhatPyYAMLCannotConstruct: Ansible fails on a whole file that holds
// a plain = or an unknown tag anywhere, opaque variables included; Barn
// refuses it too. Quoted = and Ansible's !unsafe are fine.
func TestWhatPyYAMLCannotConstruct(t *testing.T) {
	for v, fails := range map[string]bool{"=": true, "!foo x": true, "[=]": true, "!!python/name:os.system x": true, "'='": false, "!unsafe x": false, "{b: =}": true} {
		data := []byte("all:\n  vars:\n    pg_note: " + v + "\n  hosts:\n    10.10.10.11:\n")
		_, err := HostVars(Bytes(data, "pigsty.yml"))
		if (err != nil) != fails {
			t.Errorf("pg_note: %s: %v", v, err)
		}
	}
}
