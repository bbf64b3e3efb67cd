package inventory

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"barn.dev/lib/spec"
)

// crossCheckInventories are the inventories whose every consumed value
// must equal Ansible's: testdata/ansible/*.yml, every testdata/ansible/*/
// case directory (an inventory with group_vars/ and host_vars/ beside
// it), the repository's copy of Pigsty's own inventories, and
// BARN_PIGSTY_INVENTORIES, an optional extra directory.
func crossCheckInventories(t *testing.T) []string {
	files, _ := filepath.Glob("testdata/ansible/*.yml")
	cases, _ := filepath.Glob("testdata/ansible/*/*.yml")
	files = append(files, cases...)
	dirs := []string{"testdata/pigsty"}
	if extra := os.Getenv("BARN_PIGSTY_INVENTORIES"); extra != "" {
		dirs = append(dirs, extra)
	}
	for _, dir := range dirs {
		for _, pat := range []string{"*.yml", "*/*.yml"} {
			m, _ := filepath.Glob(filepath.Join(dir, pat))
			files = append(files, m...)
		}
	}
	if len(files) < 35 {
		t.Fatalf("only %d inventories to cross-check", len(files))
	}
	return files
}

// TestAnsibleCrossCheck compares, for every cross-check inventory, the
// consumed variables of every host as Barn resolves them (HostVars: the
// one resolution Resolve uses) with `ansible-inventory -i FILE --list`.
// Where Barn refuses a value as ambiguous, its problem must state
// Ansible's pick.
func TestAnsibleCrossCheck(t *testing.T) {
	ans := needAnsible(t)
	files := crossCheckInventories(t)
	for _, f := range files {
		in, err := Open(f)
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := ans.list(f)
		if err != nil {
			t.Fatal(err)
		}
		switch o := compareWithAnsible(t, f, in, nil, theirs); o {
		case outcomeAgree, outcomeRefusedByBarn:
		default:
			t.Errorf("%s: outcome %d; every cross-check inventory must read as Ansible reads it", f, o)
		}
	}
	t.Logf("cross-check: %d inventories read exactly as ansible-core %s reads them", len(files), ans.Version)
}

// TestAnsibleDriverIsTheBinary: the in-process driver prints exactly what
// the ansible-inventory binary prints, for a handful of inventories with
// group_vars/ and host_vars/ files and directories and a generated case.
func TestAnsibleDriverIsTheBinary(t *testing.T) {
	ans := needAnsible(t)
	bin, err := ansibleBinary()
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{"testdata/pigsty/demo/demo.yml", "testdata/ansible/precedence.yml", "testdata/ansible/yaml11.yml"}
	cases, _ := filepath.Glob("testdata/ansible/*/*.yml")
	paths = append(paths, cases...)
	for _, seed := range []uint64{1, 7, 42} {
		paths = append(paths, writeCase(t, seed))
	}
	env := ansibleEnv(t)
	for _, p := range paths {
		got, err := ans.list(p)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		abs, _ := filepath.Abs(p)
		cmd := exec.CommandContext(ctx, bin, "-i", abs, "--list")
		cmd.Dir, cmd.Env = filepath.Dir(abs), env
		out, err := cmd.Output()
		cancel()
		if (err == nil) != got.OK {
			t.Fatalf("%s: binary error %v, driver ok=%v %s", p, err, got.OK, got.Error)
		}
		if err != nil {
			continue
		}
		var a, b any
		if json.Unmarshal(out, &a) != nil || json.Unmarshal([]byte(got.List), &b) != nil || !reflect.DeepEqual(a, b) {
			t.Errorf("%s: the driver and ansible-inventory differ:\nbinary: %s\ndriver: %s", p, out, got.List)
		}
	}
}

// TestPrecedenceIsAnsibles: Barn's precedence data is the installed
// Ansible's VARIABLE_PRECEDENCE followed by the two host steps of
// VariableManager.get_vars.
func TestPrecedenceIsAnsibles(t *testing.T) {
	ans := needAnsible(t)
	var names []string
	for _, l := range precedence {
		names = append(names, l.Name)
	}
	want := append(append([]string{}, ans.Precedence...), "host", "host_plugins")
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("precedence %v, Ansible %v", names, want)
	}
}

// TestIssue11Cases: the three inventories of issue 11 resolve to what
// Ansible reads from them.
func TestIssue11Cases(t *testing.T) {
	ans := needAnsible(t)
	for _, c := range []struct {
		path, host, key string
		ansible         any
		check           func(t *testing.T, dir string)
	}{
		{"testdata/ansible/issue11-group-vars/pigsty.yml", "10.10.10.12", "vm_mem", 4096.0, func(t *testing.T, p string) {
			s := resolveFile(t, p)
			for _, n := range s.Nodes {
				want := int64(1 << 30)
				if strings.HasPrefix(n.Name, "pg-test-") {
					want = 4 << 30
				}
				if n.MemoryBytes != want {
					t.Errorf("%s: memory %d, want %d", n.Name, n.MemoryBytes, want)
				}
			}
		}},
		{"testdata/ansible/issue11-host-vars/pigsty.yml", "10.10.10.11", "nodename", "pg-test-primary", func(t *testing.T, p string) {
			if got := strings.Join(resolveFile(t, p).NodeNames(), " "); got != "pg-meta-1 pg-test-primary pg-test-2" {
				t.Errorf("nodes %s", got)
			}
		}},
		{"testdata/pigsty/demo/demo.yml", "10.10.10.10", "nodename", "pigsty.cc", func(t *testing.T, p string) {
			s := resolveFile(t, p)
			if len(s.Nodes) != 1 || s.Nodes[0].Name != "pigsty" || s.Nodes[0].FQDN != "pigsty.cc" || s.Control != "pigsty" {
				t.Errorf("nodes %+v", s.Nodes)
			}
		}},
	} {
		got, err := ans.list(c.path)
		if err != nil || !got.OK {
			t.Fatalf("%s: %v %s", c.path, err, got.Error)
		}
		if v := got.Hostvars[c.host][c.key]; v != c.ansible {
			t.Errorf("%s: Ansible says %s %s = %v, the case expects %v", c.path, c.host, c.key, v, c.ansible)
		}
		c.check(t, c.path)
	}
}

func resolveFile(t *testing.T, path string) *spec.Spec {
	t.Helper()
	in, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := ResolveInput(in)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return s
}

func hostNames(m map[string]map[string]any) []string {
	out := []string{}
	for h := range m {
		out = append(out, h)
	}
	sort.Strings(out)
	return out
}

// normalise round-trips v through JSON so Go and Python values compare
// (int64 vs float64 numbers).
func normalise(t testing.TB, v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
