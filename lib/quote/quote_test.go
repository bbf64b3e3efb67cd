package quote

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
)

// nasty are values that break a naive writer of some syntax: separators,
// comment and quote characters, escapes, expansions, commas, globs and
// non-ASCII text.
var nasty = []string{
	"plain", "a b", "two  spaces", " lead", "trail ", "tab\there", "#start", "mid#dle", "a #b",
	`it's`, `say "hi"`, `back\slash`, `trail\`, `\"`, `\'`, `'`, `"`, `''`, `\\`,
	"100%", "%%", "%h", "%d%u", "$HOME", "$x{y}", "a$", "~", "~user", "=lead", "k=v",
	"a,b", ",,", ",", "star*", "q?", "[x]", "{a,b}", "!bang", ";", "&|<>()", "`cmd`", "$(cmd)",
	"é", "日本語", "emoji 😀", "nbsp\u00a0x", "sep\u2028x", "bom\ufeffx", "zero\u200bwidth",
}

func isRefusal(err error) bool {
	e := exitcode.As(err)
	return e != nil && e.Class == exitcode.Usage && e.Reason == ReasonUnrepresentable
}

// TestShellIsReadBackBySh: dash (Debian's sh), bash and Python's
// shlex.split (Ansible's reader of ssh arguments) read every Shell and
// ShellIfNeeded word back as exactly the value, one word each.
func TestShellIsReadBackBySh(t *testing.T) {
	values := append([]string{"", "multi\nline", "cr\rx"}, nasty...)
	for _, quote := range []func(string) string{Shell, ShellIfNeeded} {
		words := make([]string, len(values))
		for i, v := range values {
			words[i] = quote(v)
		}
		line := strings.Join(words, " ")
		for _, sh := range []string{"sh", "bash"} {
			out, err := exec.Command(sh, "-c", "set -- "+line+`; for a; do printf '%s\0' "$a"; done`).Output()
			if err != nil {
				t.Fatalf("%s: %v", sh, err)
			}
			got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
			if !equal(got, values) {
				t.Errorf("%s read %q\nwant %q", sh, got, values)
			}
		}
		out, err := exec.Command("python3", "-c", "import json,shlex,sys; print(json.dumps(shlex.split(sys.argv[1])))", line).Output()
		if err != nil {
			t.Fatalf("python3 shlex: %v", err)
		}
		var got []string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if !equal(got, values) {
			t.Errorf("shlex.split read %q\nwant %q", got, values)
		}
	}
	if got := ShellIfNeeded("pigsty.yml"); got != "pigsty.yml" {
		t.Errorf("ShellIfNeeded(plain) = %s", got)
	}
	if got := Shell("pigsty.yml"); got != "'pigsty.yml'" {
		t.Errorf("Shell(plain) = %s", got)
	}
}

// sshG runs `ssh -G` with args and returns its "key value" lines.
func sshG(t *testing.T, args ...string) map[string][]string {
	t.Helper()
	cmd := exec.Command("ssh", append([]string{"-G"}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ssh -G %q: %v: %s", args, err, stderr.String())
	}
	m := map[string][]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(l, " "); ok {
			m[k] = append(m[k], v)
		}
	}
	return m
}

// TestSSHWordIsReadBackBySSH: OpenSSH reads every SSHWord back as exactly
// the value, in a config file and as `ssh -o Key=Value` (XAuthLocation: a
// plain string option that ssh -G prints unexpanded, case kept).
func TestSSHWordIsReadBackBySSH(t *testing.T) {
	values := append([]string{"tab\tin"}, nasty...)
	var cfg strings.Builder
	for i, v := range values {
		w, err := SSHWord(v)
		if err != nil {
			t.Fatalf("SSHWord(%q): %v", v, err)
		}
		fmt.Fprintf(&cfg, "Host h%d\n  XAuthLocation %s\n", i, w)
	}
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	for i, v := range values {
		if got := sshG(t, "-F", path, fmt.Sprintf("h%d", i))["xauthlocation"]; len(got) != 1 || got[0] != v {
			t.Errorf("config: SSHWord(%q) read back as %q", v, got)
		}
		w, _ := SSHWord(v)
		if got := sshG(t, "-F", "/dev/null", "-o", "XAuthLocation="+w, "h")["xauthlocation"]; len(got) != 1 || got[0] != v {
			t.Errorf("-o: SSHWord(%q) read back as %q", v, got)
		}
	}
	for _, bad := range []string{"", "line\nbreak", "cr\rx", "nul\x00x", "del\x7fx"} {
		if _, err := SSHWord(bad); !isRefusal(err) {
			t.Errorf("SSHWord(%q) = %v, want a refusal", bad, err)
		}
	}
}

// TestSSHPathIsReadBackBySSH: UserKnownHostsFile (which ssh -G prints
// after %-token and ${ENV} expansion) reads back as exactly the path.
func TestSSHPathIsReadBackBySSH(t *testing.T) {
	for _, v := range nasty {
		p := "/tmp/barn " + v + "/known_hosts"
		w, err := SSHPath(p)
		if err != nil {
			if strings.Contains(p, "${") {
				continue
			}
			t.Fatalf("SSHPath(%q): %v", p, err)
		}
		if got := sshG(t, "-F", "/dev/null", "-o", "UserKnownHostsFile="+w, "h")["userknownhostsfile"]; len(got) != 1 || got[0] != p {
			t.Errorf("SSHPath(%q) = %s read back as %q", p, w, got)
		}
	}
	for _, bad := range []string{"relative/key", "~/.ssh/key", "/home/${USER}/key", "/a\nb"} {
		if _, err := SSHPath(bad); !isRefusal(err) {
			t.Errorf("SSHPath(%q) = %v, want a refusal", bad, err)
		}
	}
}

// TestSSHIncludeIsReadBySSH: an Include of a file whose name has spaces,
// quotes, glob characters, '%', '$' and non-ASCII text reads that file and
// no other.
func TestSSHIncludeIsReadBySSH(t *testing.T) {
	dir := t.TempDir()
	odd := filepath.Join(dir, `barn home #1 it's "q" [x] * ? % ${HOME} é\`)
	if err := os.MkdirAll(odd, 0o700); err != nil {
		t.Fatal(err)
	}
	frag := filepath.Join(odd, "barn_config")
	if err := os.WriteFile(frag, []byte("Host inc\n  HostName included.example\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A sibling the unescaped glob would also match.
	if err := os.WriteFile(filepath.Join(odd, "barn_configX"), []byte("Host inc\n  HostName wrong.example\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	inc, err := SSHInclude(frag)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config")
	if err := os.WriteFile(cfg, []byte("Include "+inc+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := sshG(t, "-F", cfg, "inc")["hostname"]; len(got) != 1 || got[0] != "included.example" {
		t.Errorf("Include %s: hostname %q", inc, got)
	}
	if _, err := SSHInclude("barn_config"); !isRefusal(err) {
		t.Errorf("a relative Include was not refused: %v", err)
	}
}

// TestYAMLIsReadBackByPyYAML: PyYAML (cloud-init's and Ansible's reader)
// loads every YAML scalar as exactly the string, never as another type.
func TestYAMLIsReadBackByPyYAML(t *testing.T) {
	values := append([]string{"", "yes", "no", "on", "off", "null", "~", "1_000", "0x1f", "1:20", "52:54:00:12:34:56", "2001-12-14", "1e3",
		".inf", "- item", "key: value", "{{ jinja }}", "{% x %}", "multi\nline", "cr\rx", "ctl\x01\x1b", "nel\u0085x", "tab\t", "  "}, nasty...)
	var doc strings.Builder
	for i, v := range values {
		y, err := YAML(v)
		if err != nil {
			t.Fatalf("YAML(%q): %v", v, err)
		}
		if strings.Contains(y, "\n") {
			t.Errorf("YAML(%q) spans lines: %s", v, y)
		}
		fmt.Fprintf(&doc, "k%d: %s\n", i, y)
	}
	cmd := exec.Command("python3", "-c", "import json,sys,yaml; d=yaml.safe_load(sys.stdin); print(json.dumps([d['k%d'%i] for i in range(len(d))]))")
	cmd.Stdin = strings.NewReader(doc.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3 yaml: %v\n%s", err, doc.String())
	}
	var got []any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	for i, v := range values {
		if s, ok := got[i].(string); !ok || s != v {
			t.Errorf("YAML(%q) read back as %#v", v, got[i])
		}
	}
	if _, err := YAML("bad\xffutf8"); !isRefusal(err) {
		t.Errorf("invalid UTF-8 was not refused: %v", err)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
