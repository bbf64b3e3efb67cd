package exitcode

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var reasonName = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

func TestReasonTableIsWellFormed(t *testing.T) {
	if !slices.IsSortedFunc(reasons, func(a, b Reason) int { return strings.Compare(a.Name, b.Name) }) {
		t.Error("the reason table is not sorted by name")
	}
	for i, r := range reasons {
		if i > 0 && reasons[i-1].Name == r.Name {
			t.Errorf("reason %s is listed twice", r.Name)
		}
		if !reasonName.MatchString(r.Name) {
			t.Errorf("reason %q is not snake_case", r.Name)
		}
		if r.Class != Varies && (!r.Class.Valid() || r.Class == OK) {
			t.Errorf("reason %s has class %q, not a failure class", r.Name, r.Class)
		}
		if r.Meaning == "" || strings.Contains(r.Meaning, "\n") {
			t.Errorf("reason %s needs a one-line meaning", r.Name)
		}
		if got, ok := LookupReason(r.Name); !ok || got != r {
			t.Errorf("LookupReason(%q) = %v, %v", r.Name, got, ok)
		}
	}
	if _, ok := LookupReason("no_such_reason"); ok {
		t.Error("LookupReason found a reason the table does not list")
	}
}

// TestReasonTableMatchesSource scans every module's non-test Go source:
// each reason it emits must be in the table, with the table's class where
// the class is visible at the emitting site, and each table entry must be
// emitted somewhere.
func TestReasonTableMatchesSource(t *testing.T) {
	found, unresolved := scan(t, repoRoot(t))
	for _, pos := range unresolved {
		t.Errorf("%s: a reason that is not a literal, a constant or a variable named reason; the table test cannot see it", pos)
	}
	if len(found) < 100 {
		t.Fatalf("the scan found only %d reasons; it no longer sees the source", len(found))
	}
	for name, sites := range found {
		r, ok := LookupReason(name)
		if !ok {
			t.Errorf("%s: reason %q is not in the table (lib/exitcode/reasons.go)", sites[0].pos, name)
			continue
		}
		for _, s := range sites {
			if s.class != "" && r.Class != Varies && s.class != string(r.Class) {
				t.Errorf("%s: reason %s with class %s; the table says %s", s.pos, name, s.class, r.Class)
			}
		}
	}
	for _, r := range reasons {
		if _, ok := found[r.Name]; !ok {
			t.Errorf("the table lists %s, which no code emits", r.Name)
		}
	}
}

const (
	readmeBegin = "<!-- reasons:begin: generated from lib/exitcode/reasons.go; `BARN_UPDATE=1 go test ./exitcode` in lib/ rewrites it -->\n"
	readmeEnd   = "<!-- reasons:end -->\n"
)

// readmeTable is the README's listing of the reason table.
func readmeTable() string {
	var b strings.Builder
	b.WriteString(readmeBegin)
	b.WriteString("| reason | exit | meaning |\n|---|---|---|\n")
	for _, r := range reasons {
		exit := fmt.Sprintf("%d %s", r.Class.Code(), r.Class)
		if r.Class == Varies {
			exit = "the cause's"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", r.Name, exit, r.Meaning)
	}
	b.WriteString(readmeEnd)
	return b.String()
}

// TestREADMEListsReasons keeps README's reason section equal to the table;
// BARN_UPDATE=1 rewrites it.
func TestREADMEListsReasons(t *testing.T) {
	path := filepath.Join(repoRoot(t), "README.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i, j := bytes.Index(data, []byte(readmeBegin)), bytes.Index(data, []byte(readmeEnd))
	if i < 0 || j < i {
		t.Fatalf("%s has no reason section between %q and %q", path, readmeBegin, readmeEnd)
	}
	want := readmeTable()
	if string(data[i:j+len(readmeEnd)]) == want {
		return
	}
	if os.Getenv("BARN_UPDATE") != "1" {
		t.Fatalf("%s: the reason section differs from lib/exitcode/reasons.go (BARN_UPDATE=1 rewrites it)", path)
	}
	out := append(append(slices.Clone(data[:i]), want...), data[j+len(readmeEnd):]...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}
