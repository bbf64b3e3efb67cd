package inventory

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"barn.dev/lib/exitcode"
)

// FuzzResolve: the reader never panics, never hangs (each input resolves
// well within a second) and fails only with usage-class errors carrying
// problems.
func FuzzResolve(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/ansible/*.yml")
	for _, s := range seeds {
		if b, err := os.ReadFile(s); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("all:\n  hosts:\n    10.10.10.11: { vm_mem: 8G }\n"))
	f.Add([]byte("a: &a [*a]\nall: {hosts: {10.10.10.11: {<<: *a}}}\n"))
	f.Add([]byte("x: &x {<<: *x}\n"))
	f.Add([]byte("all:\n  children:\n    a: {children: {b: {children: {a: }}}}\n"))
	f.Add([]byte("all: {hosts: {'10.10.10.[1:9999999]': {}}}"))
	f.Add([]byte("---\n---\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		start := time.Now()
		s, _, err := Resolve(data, "fuzz.yml")
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("Resolve took %v", d)
		}
		if err != nil {
			if c := exitcode.ClassOf(err); c != exitcode.Usage {
				t.Fatalf("error class %s, want usage: %v", c, err)
			}
			if len(Problems(err)) == 0 {
				t.Fatalf("usage error without problems: %v", err)
			}
			return
		}
		if s == nil || len(s.Nodes) == 0 || s.SpecHash == "" {
			t.Fatalf("success without a sealed spec")
		}
	})
}
