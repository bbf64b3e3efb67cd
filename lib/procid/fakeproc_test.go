package procid

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// fakeProcRoot points procRoot at a new directory for t's duration, with
// boot id b00t, and returns it and a writer of files under it (parents
// made; a failed write fails t).
func fakeProcRoot(t *testing.T) (root string, write func(path, body string)) {
	t.Helper()
	root = t.TempDir()
	old := procRoot
	procRoot = root
	t.Cleanup(func() { procRoot = old })
	write = writeProc(t)
	write("sys/kernel/random/boot_id", "b00t\n")
	return root, write
}

// writeProc is a writer of files under procRoot (parents made; a failed
// write fails t, also from another goroutine).
func writeProc(t *testing.T) func(path, body string) {
	root := procRoot
	return func(path, body string) {
		path = filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Error(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// statLine is a stat(5) line of thread tid named comm: its state, flags
// (field 9), num_threads (field 20) and starttime (field 22).
func statLine(tid int, comm, state string, flags, threads int, start string) string {
	return fmt.Sprintf("%d (%s) %s 1 %d %d 0 -1 %d 100 0 0 0 1 2 0 0 20 0 %d 0 %s 1000 10\n", tid, comm, state, tid, tid, flags, threads, start)
}
