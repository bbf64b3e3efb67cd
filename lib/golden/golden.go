// Package golden is the one golden-file check of Barn's tests: a test
// renders its output and Check compares it, byte for byte, with a file
// kept in the repository. With BARN_UPDATE=1 in the environment Check
// rewrites the file instead (make golden-update), so a change of output is
// reviewed as a git diff.
package golden

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Update reports whether golden files are being rewritten (BARN_UPDATE=1).
func Update() bool { return os.Getenv("BARN_UPDATE") == "1" }

// Check fails t unless got equals the content of the file at path. With
// Update it first writes got there (creating the directory). A missing
// file is a failure naming BARN_UPDATE=1, never an empty golden.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if Update() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (BARN_UPDATE=1 creates it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (BARN_UPDATE=1 rewrites it; review with git diff):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
