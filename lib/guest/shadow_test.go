package guest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
)

// TestShadowedMatchTerms: a user's Match block answers for a name when its
// host/originalhost terms pick that name out, whatever its user,
// localuser, exec or canonical criteria say now (they change with the
// login user, the local account or an exec's state). Proven against the
// real ssh on generated Match lines: the truth is ssh's own verdict on the
// line's host terms alone — it applies to the name and not to an
// unrelated one — and ShadowedNames must flag exactly those lines, with
// their file and line.
func TestShadowedMatchTerms(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("ssh is not installed")
	}
	const name, other = "pg-meta-1", "zz-unrelated-9"
	me := "root"
	if u, err := user.Current(); err == nil {
		me = u.Username
	}
	hostTerms := []string{"host pg-meta-1", "Host PG-META-1", "originalhost pg-*", "host a,pg-meta-1", `host "*"`, "host other",
		"!host other", "host pg-meta-1 originalhost other", "host *,pg-meta-1", "!host pg-meta-1"}
	others := []string{"", "user nobody-x", "localuser nobody-x", `exec "false"`, "canonical", "user " + me}
	dir := t.TempDir()
	n := 0
	for _, h := range hostTerms {
		for _, o := range others {
			for _, lines := range [][]string{{h, o}, {o, h}} {
				criteria := strings.TrimSpace(strings.Join(lines, " "))
				if o == "user "+me && !strings.Contains(h, "pg-meta-1") {
					continue // applies now to every name: flagged as before (conservative), not this kind
				}
				want := appliesTo(t, dir, h, name) && !appliesTo(t, dir, h, other)
				home := filepath.Join(dir, fmt.Sprint("home", n))
				n++
				p := Paths(home, "")
				_ = os.MkdirAll(p.Dir, 0o700)
				conf := "# the user's\nHost unrelated\n  User u\n\nMatch " + criteria + "\n  HostName 203.0.113.10\n"
				if err := os.WriteFile(p.Config, []byte(conf), 0o600); err != nil {
					t.Fatal(err)
				}
				got, err := ShadowedNames(context.Background(), "", p, []string{name})
				if err != nil {
					t.Fatalf("Match %s: %v", criteria, err)
				}
				if want != (len(got) == 1) || len(got) > 1 {
					t.Errorf("Match %s: shadows %+v, want shadowed=%v", criteria, got, want)
					continue
				}
				if want && (got[0].File != p.Config || got[0].Line != 5 || got[0].Block != "Match "+criteria) {
					t.Errorf("Match %s: shadow %+v, want %s:5", criteria, got[0], p.Config)
				}
			}
		}
	}
}

// appliesTo is ssh's verdict on `Match terms` for name: ssh -G sets the
// block's HostName.
func appliesTo(t *testing.T, dir, terms, name string) bool {
	t.Helper()
	f := filepath.Join(dir, "terms")
	if err := os.WriteFile(f, []byte("Match "+terms+"\n  HostName 192.0.2.99\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ssh", "-G", "-F", f, name).Output()
	if err != nil {
		t.Fatalf("ssh -G Match %s: %v", terms, err)
	}
	return strings.Contains(string(out), "\nhostname 192.0.2.99\n")
}
