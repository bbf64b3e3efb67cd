package catalog

import (
	"fmt"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
)

// Every spelling of a repository URL that Go's HTTP client sends to the same
// host, port and path is one repository: one canonical root, one record
// key, and for the official roots the official repository (signature by
// the compiled keys always required, one high-water mark).
func TestRepositorySpellingsShareOneRecord(t *testing.T) {
	for _, tc := range []struct {
		canonical string
		spellings []string
	}{
		{OfficialRoot, []string{
			"https://repo.pigsty.io/barn", "https://REPO.pigsty.io:443/barn/", "https://repo.pigsty.io//barn/.",
			"https://repo.pigsty.io./barn", "https://repo.pigsty.io:/barn", "https://repo.pigsty.io:0443/barn",
			"https://repo.pigsty.io.:00443/barn/", "https://ｒｅｐｏ.pigsty.io/barn", "https://ＲＥＰＯ．ＰＩＧＳＴＹ．ＩＯ/barn",
			"https://repo。pigsty。io。/barn", "https://repo.pigsty.io/%62arn", "HTTPS://Repo.Pigsty.IO/x/../barn",
		}},
		{MirrorRoot, []string{"https://repo.pigsty.cc./barn", "https://repo.pigsty.cc:0443/barn", "https://ｒｅｐｏ.ｐｉｇｓｔｙ.ｃｃ/barn"}},
		// plain HTTP to an official host is still the official repository:
		// its keys only, its mark (fetched over HTTP as asked)
		{"http://repo.pigsty.io/barn", []string{"http://repo.pigsty.io./barn", "http://repo.pigsty.io:080/barn", "http://repo.pigsty.io:/barn"}},
		{"https://lab.example/repo", []string{"https://LAB.example./repo/", "https://lab.example:443/repo", "https://ｌａｂ.example/repo"}},
		{"https://lab.example:8443/repo", []string{"https://lab.example:08443/repo", "https://lab.example.:8443/repo"}},
		{"https://127.0.0.1:8443/r", []string{"https://127.0.0.1:08443/r", "https://[::ffff:127.0.0.1]:8443/r", "https://１２７.０.０.１:8443/r", "https://127.0.0.1.:8443/r"}},
		{"https://[::1]/barn", []string{"https://[::1]:443/barn", "https://[0:0:0:0:0:0:0:1]/barn", "https://[::1]:/barn"}},
		{"https://[2001:db8::1]:8443/barn", []string{"https://[2001:DB8:0::1]:08443/barn"}},
		{"https://xn--bcher-kva.example/repo", []string{"https://Bücher.example/repo", "https://BÜCHER.example./repo", "https://xn--bcher-kva.example/repo", "https://XN--BCHER-KVA.example/repo"}},
		{"https://my_lab.internal/repo", []string{"https://MY_LAB.internal./repo"}},
	} {
		want, err := ParseSource(tc.canonical, true)
		if err != nil || want.Root != tc.canonical {
			t.Fatalf("ParseSource(%q) = %+v, %v: not its own canonical form", tc.canonical, want, err)
		}
		for _, loc := range tc.spellings {
			s, err := ParseSource(loc, true)
			if err != nil || s.Root != want.Root || s.Key != want.Key || s.Official != want.Official || s.RequiresSignature() != want.RequiresSignature() {
				t.Errorf("ParseSource(%q) = %+v, %v; want the record of %+v", loc, s, err, want)
			}
		}
	}
	for _, loc := range []string{"https://repo.pigsty.io./barn", "https://ｒｅｐｏ.pigsty.io/barn", "http://repo.pigsty.io:080/barn"} {
		if s, _ := ParseSource(loc, true); !s.Official || s.Key != OfficialSlot || !s.RequiresSignature() {
			t.Errorf("%s is the official repository: %+v", loc, s)
		}
	}
	// IPv6 keeps its brackets (the root must still parse as a URL).
	if s, _ := ParseSource("https://[::1]:443/x", true); s.Root != "https://[::1]/x" {
		t.Errorf("IPv6 root %q", s.Root)
	}
}

// What has no canonical form is refused with a usage error naming the URL:
// hosts that are not what they look like, or that resolvers read
// differently.
func TestRepositoryURLsWithoutCanonicalForm(t *testing.T) {
	for loc, why := range map[string]string{
		"https://rеpo.pigsty.io/barn":                       "mixes scripts", // Cyrillic е in a Latin label
		"https://xn--rpo-rdd.pigsty.io/x":                   "mixes scripts", // the same, as punycode
		"https://paypаl.example/x":                          "mixes scripts", // Cyrillic а
		"https://repo.pigsty.io../barn":                     "label \"\"",    // two trailing dots
		"https://a..b/x":                                    "label \"\"",
		"https://0177.0.0.1/x":                              "not a dotted-quad", // octal
		"https://127.1/x":                                   "not a dotted-quad", // short form
		"https://2130706433/x":                              "not a dotted-quad", // integer form
		"https://0x7f.0.0.1/x":                              "not a dotted-quad", // hex
		"https://127.000.000.001/x":                         "not a dotted-quad", // zero-padded
		"https://host:0/x":                                  "not a TCP port",
		"https://host:65536/x":                              "not a TCP port",
		"https://[127.0.0.1]/x":                             "",
		"https://ex ample.test/x":                           "",                  // url.Parse refuses
		"https://a\u200db.example/x":                        "internationalised", // zero-width joiner
		"https://xn--a.example/x":                           "internationalised", // invalid punycode
		"https://" + strings.Repeat("a", 64) + ".example/x": "1-63",
		"https://u:p@host/x":                                "no credentials",
		"https://[fe80::1%25eth0]/barn":                     "has a zone", // %eth0 and %2 can be one link
		"https://[fe80::1%252]:443/barn":                    "has a zone",
	} {
		_, err := ParseSource(loc, true)
		if e := exitcode.As(err); err == nil || e.Class != exitcode.Usage || e.Reason != "bad_repository" || !strings.Contains(e.Message, fmt.Sprintf("%q", loc)) || !strings.Contains(e.Message, why) {
			t.Errorf("ParseSource(%q) = %v, want a bad_repository usage error naming it (%q)", loc, err, why)
		}
	}
	// one script per label, and the mixes Unicode allows for CJK, pass
	for _, loc := range []string{"https://пример.испытание/x", "https://例え.テスト/x", "https://東京tokyo.example/x", "https://한국어.example/x"} {
		if _, err := ParseSource(loc, true); err != nil {
			t.Errorf("ParseSource(%q): %v", loc, err)
		}
	}
}
