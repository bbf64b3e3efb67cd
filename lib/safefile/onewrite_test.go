package safefile

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOneAtomicWrite: outside this package no Barn source replaces or
// publishes a file by hand (a temporary file plus rename or hard link) or
// through renameio directly, so every document, image, seed and config gets
// the same fsync discipline.
// The few renames left move whole artifacts and are named here.
func TestOneAtomicWrite(t *testing.T) {
	allowed := map[string]string{
		"lib/vm/launch.go:os.CreateTemp(":   "QEMU's launch stderr, a log, not a replace",
		"lib/fakeqemu/fakeqemu.go:os.Link(": "installs the test binary as the fake QEMU, not a publish",
	}
	root := filepath.Join("..", "..")
	forbidden := []string{"os.Rename(", "os.CreateTemp(", "renameio.", "ioutil.TempFile(", "os.Link(", "unix.Renameat"}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && rel != "." || rel == filepath.Join("lib", "safefile")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, f := range forbidden {
			if strings.Contains(string(src), f) && allowed[rel+":"+f] == "" {
				t.Errorf("%s uses %s: write through lib/safefile (Write, Create, Publish, PublishNew, LinkNew or Move)", rel, f)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
