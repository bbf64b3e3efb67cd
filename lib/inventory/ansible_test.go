package inventory

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"
)

// TestAnsibleCrossCheck compares, for every Pigsty inventory in
// testdata/pigsty (plus BARN_PIGSTY_INVENTORIES, an optional extra
// directory) and every testdata/ansible/*.yml file Barn accepts, the
// consumed variables of every host (HostVars) with what
// `ansible-inventory -i FILE --list` reports. admin_ip is excluded: Barn
// reads it from all.vars only, while Ansible lets host vars override it.
func TestAnsibleCrossCheck(t *testing.T) {
	bin, err := exec.LookPath("ansible-inventory")
	if err != nil {
		t.Skip("ansible-inventory is not installed (apt-get install ansible); the cross-check needs it")
	}
	files, _ := filepath.Glob("testdata/ansible/*.yml")
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
	checked := 0
	for _, f := range files {
		in, err := Open(f)
		if err != nil {
			t.Fatal(err)
		}
		ours, err := HostVars(in)
		if err != nil {
			t.Logf("%s: not cross-checked (Barn refuses it before comparing: %v)", f, err)
			continue
		}
		checked++
		t.Run(filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "-i", f, "--list")
			cmd.Env = append(os.Environ(), "ANSIBLE_LOCALHOST_WARNING=False", "ANSIBLE_INVENTORY_UNPARSED_WARNING=False")
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("ansible-inventory: %v", err)
			}
			var doc struct {
				Meta struct {
					Hostvars map[string]map[string]any `json:"hostvars"`
				} `json:"_meta"`
			}
			if err := json.Unmarshal(out, &doc); err != nil {
				t.Fatalf("ansible-inventory output: %v", err)
			}
			theirs := map[string]map[string]any{}
			for h, vars := range doc.Meta.Hostvars {
				theirs[h] = map[string]any{}
				for _, k := range ConsumedKeys() {
					if v, ok := vars[k]; ok {
						theirs[h][k] = v
					}
				}
			}
			if got, want := hostNames(ours), hostNames(theirs); !reflect.DeepEqual(got, want) {
				t.Fatalf("hosts differ:\nbarn:    %v\nansible: %v", got, want)
			}
			for h, want := range theirs {
				got := normalise(t, ours[h])
				if !reflect.DeepEqual(got, normalise(t, want)) {
					t.Errorf("host %s:\nbarn:    %v\nansible: %v", h, got, want)
				}
			}
		})
	}
	if checked < 10 {
		t.Fatalf("only %d inventories were cross-checked", checked)
	}
}

func hostNames(m map[string]map[string]any) []string {
	var out []string
	for h := range m {
		out = append(out, h)
	}
	sort.Strings(out)
	return out
}

// normalise round-trips v through JSON so Go and Python values compare
// (int64 vs float64 numbers).
func normalise(t *testing.T, v any) any {
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
