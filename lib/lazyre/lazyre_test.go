package lazyre

import (
	"regexp"
	"testing"
)

// A Regexp answers exactly as the compiled pattern, and compiles once.
func TestForwardsToRegexp(t *testing.T) {
	const pat = `^([a-z]+)-([0-9]+)$`
	r, want := New(pat), regexp.MustCompile(pat)
	if r.re != nil {
		t.Fatal("New compiled the pattern")
	}
	for _, s := range []string{"node-1", "Node-1", "node-", "x-42", ""} {
		if r.MatchString(s) != want.MatchString(s) || r.FindString(s) != want.FindString(s) ||
			len(r.FindStringSubmatch(s)) != len(want.FindStringSubmatch(s)) ||
			len(r.FindStringSubmatchIndex(s)) != len(want.FindStringSubmatchIndex(s)) ||
			len(r.FindAllSubmatchIndex([]byte(s), -1)) != len(want.FindAllSubmatchIndex([]byte(s), -1)) ||
			r.ReplaceAllString(s, "$2") != want.ReplaceAllString(s, "$2") {
			t.Errorf("%q: lazy and compiled pattern disagree", s)
		}
	}
	if first := r.Compiled(); first != r.Compiled() || r.String() != pat {
		t.Error("the pattern was compiled twice or lost its source")
	}
}

func TestInvalidPatternPanicsOnUse(t *testing.T) {
	r := New(`(`)
	defer func() {
		if recover() == nil {
			t.Error("an invalid pattern did not panic on first use")
		}
	}()
	r.MatchString("x")
}
