package hostnet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestACLProblemNamesTheLine: a refused line is reported with its number,
// its text and the helper's reason; nothing after it counts.
func TestACLProblemNamesTheLine(t *testing.T) {
	for content, want := range map[string]string{
		"allow barn0\nallow\n":                  `line 2 "allow": a command without an argument`,
		"permit barn0\n":                        `line 1 "permit barn0": unknown command "permit"`,
		"allow barn0   # the lab bridge\n":      `line 1 "allow barn0   # the lab bridge": argument "barn0   # the lab bridge" is 24 bytes`,
		"#" + strings.Repeat("x", 70000) + "\n": `line 1 "#xxxx`, // the rest of a long line is read as a new line
	} {
		a := ParseACL(content, "barn0")
		if !strings.Contains(a.Problem, want) {
			t.Errorf("ParseACL(%.40q).Problem = %q, want %q", content, a.Problem, want)
		}
	}
	if a := ParseACL("deny all\nbogus\nallow barn0\n", "barn0"); len(a.Allow) != 0 || len(a.Deny) != 1 {
		t.Errorf("rules after a refused line were read: %+v", a)
	}
	if a := ParseACL("allow barn0 # lab\n", "barn0"); a.Problem != "" || a.Allows("barn0") {
		t.Errorf(`"allow barn0 # lab" names the bridge "barn0 # lab": %+v`, a)
	}
}

// TestLoadACLIncludes: includes are read as the helper reads them, and
// what it silently ignores is noted; a cycle is a problem.
func TestLoadACLIncludes(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("partial", "allow barn0\nbogus\ndeny barn0\n")
	write("rel", "deny br7\n")
	top := write("bridge.conf", "include "+dir+"/partial\ninclude "+dir+"/missing\ninclude rel\n")
	a, notes, err := loadACL(top, "barn0", dir, nil)
	if err != nil || a.Problem != "" || !a.Allows("barn0") || len(a.Deny) != 1 || a.Deny[0] != "br7" {
		t.Fatalf("acl %+v err %v", a, err)
	}
	joined := strings.Join(notes, "\n")
	for _, want := range []string{"stops reading " + dir + "/partial", dir + "/missing, which does not exist", `relative path "rel"`} {
		if !strings.Contains(joined, want) {
			t.Errorf("notes lack %q:\n%s", want, joined)
		}
	}
	write("a", "include "+dir+"/b\n")
	write("b", "allow barn0\ninclude "+dir+"/a\n")
	cyc := write("cyc.conf", "include "+dir+"/a\n")
	if a, _, _ := loadACL(cyc, "barn0", dir, nil); !strings.Contains(a.Problem, "include cycle") {
		t.Errorf("a cycle is not a problem: %+v", a)
	}
}
