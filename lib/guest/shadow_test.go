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
// unrelated one — or on the whole line, which sets a HostName (a block
// for every name that routes this one elsewhere: TestShadowedCatchAllRoute),
// and ShadowedNames must flag exactly those lines, with their file and line.
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
				// Every block sets HostName: one that applies to the name
				// now routes it elsewhere even when it picks nothing out.
				want := appliesTo(t, dir, h, name) && !appliesTo(t, dir, h, other) || appliesTo(t, dir, criteria, name)
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

// TestShadowedCatchAllRoute: a block for every name (Host *, Match all)
// singles nothing out, but when it sends a node's name somewhere else
// than ssh's default (a corporate domain, a port, a jump host, a proxy
// command), that name already reaches one of the user's machines and
// Barn's Include would take it over: a shadow naming the block that sets
// the route and where ssh sends the name. Judged by the real ssh.
func TestShadowedCatchAllRoute(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("ssh is not installed")
	}
	const name = "pg-meta-1"
	cases := []struct {
		conf      string
		wantLine  int    // 0: no shadow
		wantRoute string // a part of the reported route
	}{
		{"Host *\n  ServerAliveInterval 30\n  User bob\n", 0, ""},
		{"Host *\n  HostName %h\n", 0, ""},
		{"Host *\n  User bob\n\nHost *\n  HostName %h.corp.example\n", 4, "hostname pg-meta-1.corp.example"},
		{"Host *\n  ProxyJump admin@bastion\n", 1, "proxyjump admin@bastion"},
		{"Match all\n  Port 2200\n", 1, "port 2200"},
		{"Host *\n  ProxyCommand nc -X 5 -x proxy:1080 %h %p\n", 1, "proxycommand nc"},
		{"Host pg-*\n  HostName 203.0.113.10\n\nHost *\n  ProxyJump b\n", 1, ""}, // the specific block is named, not the catch-all
		// A Match on the login user, the local account or a command routes
		// the name under a condition the check cannot see: answered whether
		// it applies now or not, when it sets a route; otherwise nothing.
		{"Match exec \"test -e /nonexistent/offvpn\"\n  ProxyJump bastion.corp\n", 1, ""},
		{"Match user admin\n  HostName %h.admin.corp\n", 1, ""},
		{"Match localuser root\n  IdentityFile ~/.ssh/other\n", 0, ""},
		{"Match exec \"true\"\n  ForwardAgent yes\n", 0, ""},
		// A pattern that matches every name is a catch-all too.
		{"Host ?*\n  ServerAliveInterval 30\n", 0, ""},
		{"Host ?*\n  HostName %h.corp.example\n", 1, "hostname pg-meta-1.corp.example"},
		// Options before any Host line apply to every name; a tab opens a block.
		{"HostName %h.corp.example\nHost github.com\n  User git\n", 1, "hostname pg-meta-1.corp.example"},
		{"Host *\n  ServerAliveInterval 30\nHost\tgithub.com\n  HostName ssh.github.com\nHost *\n  HostName %h.corp\n", 5, "hostname pg-meta-1.corp"},
	}
	for i, c := range cases {
		p := Paths(filepath.Join(t.TempDir(), fmt.Sprint("home", i)), "")
		_ = os.MkdirAll(p.Dir, 0o700)
		if err := os.WriteFile(p.Config, []byte(c.conf), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := ShadowedNames(context.Background(), "", p, []string{name})
		if err != nil {
			t.Fatalf("%q: %v", c.conf, err)
		}
		if c.wantLine == 0 {
			if len(got) != 0 {
				t.Errorf("%q: shadows %+v, want none", c.conf, got)
			}
			continue
		}
		if len(got) != 1 || got[0].File != p.Config || got[0].Line != c.wantLine || !strings.Contains(got[0].Route, c.wantRoute) {
			t.Errorf("%q: shadows %+v, want one at %s:%d routing %q", c.conf, got, p.Config, c.wantLine, c.wantRoute)
		}
	}
	err := ShadowError([]Shadow{{Name: name, File: "/h/.ssh/config", Line: 4, Block: "Host *", Route: "hostname pg-meta-1.corp.example, port 22"}}, nil)
	if want := "/h/.ssh/config:4: Host * sends pg-meta-1 to hostname pg-meta-1.corp.example, port 22"; !strings.Contains(err.Error(), want) {
		t.Errorf("refusal %q does not say %q", err, want)
	}
}
