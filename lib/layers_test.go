// Package lib_test holds the import-graph contract of the shared packages:
// the layers a reader should see, checked against `go list` so that a new
// import that breaks them fails here instead of in review.
package lib_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const mod = "barn.dev/lib/"

// deps runs `go list` once and returns, for every package of this module,
// its transitive non-test dependencies (go list's Deps).
func deps(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		m[f[0]] = f[1:]
	}
	if len(m) < 20 {
		t.Fatalf("go list found %d packages; want the whole module", len(m))
	}
	return m
}

// The pipeline reads as layers: the inventory reader produces a spec, the
// planner reads specs, lifecycle executes plans. Neither the planner nor
// lifecycle reads Ansible, and spec (the contract between them) depends on
// none of them.
var pipeline = []string{"inventory", "spec", "plan", "lifecycle"}

// launchers start, identify or signal QEMU. They read the records of a
// node's QEMU from lib/vmrecord and never need the state root's lock or
// event-log code (lib/state, github.com/gofrs/flock).
var launchers = []string{"qemu", "procid", "vm", "qmp", "qcow2", "vmrecord"}

var lockCode = []string{mod + "state", "github.com/gofrs/flock"}

func TestPipelineLayers(t *testing.T) {
	g := deps(t)
	uses := func(from, to string) bool { return slices.Contains(g[mod+from], mod+to) }
	// inventory -> spec, plan -> spec, lifecycle -> plan: the chain exists.
	for _, e := range [][2]string{{"inventory", "spec"}, {"plan", "spec"}, {"lifecycle", "plan"}} {
		if !uses(e[0], e[1]) {
			t.Errorf("lib/%s does not import lib/%s; the layer test is out of date", e[0], e[1])
		}
	}
	// Nothing imports across the chain: spec imports no stage, and plan and
	// lifecycle do not import inventory (the Ansible reader).
	for _, e := range [][2]string{
		{"spec", "inventory"}, {"spec", "plan"}, {"spec", "lifecycle"},
		{"plan", "inventory"}, {"plan", "lifecycle"},
		{"lifecycle", "inventory"}, {"inventory", "plan"}, {"inventory", "lifecycle"},
	} {
		if uses(e[0], e[1]) {
			t.Errorf("lib/%s imports lib/%s (directly or not); the pipeline must read %s", e[0], e[1], strings.Join(pipeline, " -> "))
		}
	}
}

func TestLaunchersNeedNoLocks(t *testing.T) {
	g := deps(t)
	for _, p := range launchers {
		d, ok := g[mod+p]
		if !ok {
			t.Errorf("lib/%s is not in the module; update the launcher list", p)
			continue
		}
		for _, l := range lockCode {
			if slices.Contains(d, l) {
				t.Errorf("lib/%s depends on %s; packages that launch or signal QEMU read lib/vmrecord, not the lock or event-log code", p, l)
			}
		}
	}
}
