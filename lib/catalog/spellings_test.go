package catalog

import (
	"fmt"
	"strings"
	"testing"
	"unicode"
)

// spellings generates every combination of the ways a URL can name the
// same scheme, host, port and path that Go's HTTP client sends to one
// server: host case, full-width letters and digits, ideographic full stops,
// a trailing root dot; no port, an empty port, the default port, a
// zero-padded port; a trailing slash, doubled slashes, "." and ".."
// segments, percent-escaped letters; the scheme's case.
func spellings(scheme, host, port, defaultPort, path string) []string {
	hosts := []string{host, strings.ToUpper(host), mixedCase(host), fullWidth(host), strings.ReplaceAll(host, ".", "。")}
	withDot := []string{}
	for _, h := range hosts {
		withDot = append(withDot, h, h+".")
	}
	ports := []string{":0" + port, ":00" + port}
	if port == defaultPort {
		ports = append(ports, "", ":")
	}
	ports = append(ports, ":"+port)
	first, rest, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	paths := []string{path, path + "/", "/" + path, path + "/.", "/x/.." + path, "/%" + fmt.Sprintf("%02X", first[0]) + first[1:] + "/" + rest}
	schemes := []string{scheme, strings.ToUpper(scheme)}
	var out []string
	for _, s := range schemes {
		for _, h := range withDot {
			for _, p := range ports {
				for _, pa := range paths {
					out = append(out, s+"://"+h+p+pa)
				}
			}
		}
	}
	return out
}

func mixedCase(s string) string {
	b := []rune(s)
	for i := range b {
		if i%2 == 0 {
			b[i] = unicode.ToUpper(b[i])
		}
	}
	return string(b)
}

// fullWidth spells ASCII letters and digits as their full-width forms
// (U+FF21...), which IDNA maps back.
func fullWidth(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= '!' && r <= '~' && r != '.' && r != '-' && r != '_' {
			return r - '!' + '！'
		}
		return r
	}, s)
}

// Generated spellings of each repository map to that repository's one
// record, and distinct repositories (another port, host or path) keep
// distinct records: normalisation neither splits nor merges. (The official
// root and its mirror share the official record by design.)
func TestGeneratedSpellingsShareOneRecord(t *testing.T) {
	keys := map[string]string{}
	total := 0
	for _, base := range []struct{ scheme, host, port, def, path, want string }{
		{"https", "lab.example", "443", "443", "/repo/images", "https://lab.example/repo/images"},
		{"https", "lab.example", "8443", "443", "/repo/images", "https://lab.example:8443/repo/images"},
		{"http", "lab.example", "80", "80", "/repo/images", "http://lab.example/repo/images"},
		{"https", "lab.example", "443", "443", "/other/images", "https://lab.example/other/images"},
		{"https", "mirror.lab.example", "443", "443", "/repo/images", "https://mirror.lab.example/repo/images"},
		{"https", "10.1.2.3", "8443", "443", "/barn/r", "https://10.1.2.3:8443/barn/r"},
		{"https", "repo.pigsty.io", "443", "443", "/barn", OfficialRoot},
		{"https", "repo.pigsty.cc", "443", "443", "/barn", MirrorRoot},
	} {
		want, err := ParseSource(base.want, true)
		if err != nil || want.Root != base.want {
			t.Fatalf("ParseSource(%q) = %+v, %v", base.want, want, err)
		}
		if prev, dup := keys[want.Key]; dup && !want.Official { // the official roots share one record by design
			t.Fatalf("%s and %s share a record", prev, want.Root)
		}
		keys[want.Key] = want.Root
		for _, loc := range spellings(base.scheme, base.host, base.port, base.def, base.path) {
			total++
			s, err := ParseSource(loc, true)
			if err != nil || s.Key != want.Key || s.Root != want.Root || s.Official != want.Official {
				t.Errorf("ParseSource(%q) = %+v, %v; want the record of %s", loc, s, err, want.Root)
			}
		}
	}
	if total < 1000 {
		t.Fatalf("only %d spellings generated", total)
	}
}
