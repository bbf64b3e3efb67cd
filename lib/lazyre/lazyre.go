// Package lazyre is a regular expression compiled on first use, so a
// package-level pattern costs nothing when a program starts: every Barn
// tool imports the validators of most packages, and `barn-node version`
// must not compile their patterns (issue 19: at most 3 ms of package init).
//
// A Regexp forwards the methods Barn uses; an invalid pattern panics on
// first use exactly as regexp.MustCompile would have at init (each
// package's tests use its patterns, so a typo still fails there).
package lazyre

import (
	"regexp"
	"sync"
)

// Regexp is a pattern compiled by the first method call.
type Regexp struct {
	pattern string
	once    sync.Once
	re      *regexp.Regexp
}

// New returns a Regexp for pattern (regexp syntax), not yet compiled.
func New(pattern string) *Regexp { return &Regexp{pattern: pattern} }

// Compiled returns the compiled pattern, compiling it on the first call.
func (r *Regexp) Compiled() *regexp.Regexp {
	r.once.Do(func() { r.re = regexp.MustCompile(r.pattern) })
	return r.re
}

// String is the source pattern; it compiles nothing.
func (r *Regexp) String() string { return r.pattern }

func (r *Regexp) MatchString(s string) bool { return r.Compiled().MatchString(s) }

func (r *Regexp) FindString(s string) string { return r.Compiled().FindString(s) }

func (r *Regexp) FindStringSubmatch(s string) []string { return r.Compiled().FindStringSubmatch(s) }

func (r *Regexp) FindStringSubmatchIndex(s string) []int {
	return r.Compiled().FindStringSubmatchIndex(s)
}

func (r *Regexp) FindAllSubmatchIndex(b []byte, n int) [][]int {
	return r.Compiled().FindAllSubmatchIndex(b, n)
}

func (r *Regexp) ReplaceAllString(src, repl string) string {
	return r.Compiled().ReplaceAllString(src, repl)
}
