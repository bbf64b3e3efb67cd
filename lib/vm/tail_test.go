package vm

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// stderrTail quotes QEMU's last words from its log: the last 10 lines of
// at most the last 2 KiB of a regular file, and nothing from a FIFO, a
// symlink or a missing file (a FIFO at qemu.log must not hang a start).
func TestStderrTailReadsOnlyTheEndOfARegularFile(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "qemu.log")
	var b strings.Builder
	for i := 0; i < 5000; i++ {
		b.WriteString("filler line\n")
	}
	b.WriteString("qemu-system-x86_64: last words\n")
	if err := os.WriteFile(log, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	got := stderrTail(log)
	if lines := strings.Split(got, "\n"); len(lines) != 10 || lines[9] != "qemu-system-x86_64: last words" {
		t.Errorf("tail of a long log: %q", got)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(log, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, link, filepath.Join(dir, "absent")} {
		if got := stderrTail(p); got != "" {
			t.Errorf("stderrTail(%s) = %q, want nothing", filepath.Base(p), got)
		}
	}
}
