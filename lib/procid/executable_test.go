package procid

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"barn.dev/lib/vmrecord"
)

// installBinary puts this test binary at dir/name (a hard link when
// possible) and returns its path: another name whose processes sleep like
// sleeper's.
func installBinary(t *testing.T, dir, name string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, name)
	if err := os.Link(self, dst); err == nil {
		return dst
	}
	return copyBinary(t, dir, name)
}

// copyBinary puts a copy of this test binary at dir/name: another file
// (its own inode) whose processes sleep like sleeper's.
func copyBinary(t *testing.T, dir, name string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, name)
	in, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}

// spawn runs the file path with argv (argv[0] included, as given) as a
// sleeper and returns its PID once exec is done.
func spawn(t *testing.T, path string, argv ...string) int {
	t.Helper()
	c := &exec.Cmd{Path: path, Args: argv, Env: append(os.Environ(), helperEnv+"=1")}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	for i := 0; i < 200; i++ { // until exec is done: the command line is the one given
		if b, _ := os.ReadFile("/proc/" + strconv.Itoa(c.Process.Pid) + "/cmdline"); strings.HasPrefix(string(b), argv[0]+"\x00") {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	return c.Process.Pid
}

// TestFindRequiresTheInvocationsExecutable: a process is a node's QEMU
// only when it runs the invocation's binary (its /proc/<pid>/exe) with the
// invocation's argv. Another executable started with the node's argv byte
// for byte (argv[0] included) still claims the node, so it keeps the table
// from proving absence, but it is never the sole exact match.
func TestFindRequiresTheInvocationsExecutable(t *testing.T) {
	dir := t.TempDir()
	qemu := installBinary(t, dir, "qemu-system-x86_64")
	mimic := copyBinary(t, dir, "mimic")
	uuid := fmt.Sprintf("6a1c2f0e-7d3b-4e59-8b21-%012x", time.Now().UnixNano()&0xffffffffffff)
	inv := vmrecord.Invocation{Binary: qemu, Args: []string{"-name", "n1", "-uuid", uuid}}
	claim := Claim{UUID: uuid}
	argv := append([]string{inv.Binary}, inv.Args...)

	pid := spawn(t, mimic, argv...)
	tab, err := Find(claim, inv)
	if err != nil {
		t.Fatal(err)
	}
	if len(tab.Matches) != 1 || tab.Matches[0].PID != pid || tab.Absent() {
		t.Fatalf("the mimic (pid %d) must claim the node: %+v", pid, tab)
	}
	if m := tab.Matches[0]; m.Exact || !m.Argv || m.Process == nil || m.Process.ArgvHash != ArgvHash(inv) || tab.Sole() != nil {
		t.Fatalf("argv %v from %s is not the invocation's binary %s: %+v, want argv-only, no sole match", argv, mimic, qemu, m)
	}

	real := spawn(t, qemu, argv...)
	tab, _ = Find(claim, inv)
	if len(tab.Matches) != 2 || tab.Sole() != nil {
		t.Fatalf("mimic and QEMU: %+v, want two claimants and no sole match", tab)
	}
	for _, m := range tab.Matches {
		if m.Exact != (m.PID == real) {
			t.Errorf("pid %d exact=%v (QEMU is pid %d)", m.PID, m.Exact, real)
		}
	}
}

// TestSameExecutable: the invocation's binary names the file a process
// runs literally or through symlinks resolved now.
func TestSameExecutable(t *testing.T) {
	dir := t.TempDir()
	bin := installBinary(t, dir, "qemu-system-x86_64")
	link := filepath.Join(dir, "qemu")
	if err := os.Symlink(bin, link); err != nil {
		t.Fatal(err)
	}
	p, err := Capture(spawn(t, link, link, "-name", "n1"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Executable != bin || !SameExecutable(p.Executable, link) || !SameExecutable(p.Executable, bin) ||
		!RunsBinary(p, link) || !RunsBinary(p, bin) {
		t.Errorf("started through symlink %s: exe %q, want %q and both names accepted", link, p.Executable, bin)
	}
	if SameExecutable(p.Executable, filepath.Join(dir, "other")) || SameExecutable(p.Executable, "") || RunsBinary(p, "") {
		t.Error("another path was accepted as the binary")
	}
}

// TestRunsBinaryNeedsTheSameFile: a path is not a file. Once the file at
// the invocation's path is another one (renamed over it: what a package
// upgrade does, or an attacker who swaps a mimic in before the process
// is judged), /proc/<pid>/exe still shows the path (with " (deleted)",
// which Capture strips) but the process runs the old file: RunsBinary,
// the proof a launch or a table scan needs, refuses it, while a tuple
// recorded before the swap still holds (Observe: Ours, same device and
// inode as recorded).
func TestRunsBinaryNeedsTheSameFile(t *testing.T) {
	dir := t.TempDir()
	bin := installBinary(t, dir, "qemu-system-x86_64")
	pid := spawn(t, bin, bin, "-name", "n2")
	before, err := Capture(pid)
	if err != nil {
		t.Fatal(err)
	}
	if !RunsBinary(before, bin) {
		t.Fatalf("%+v does not run %s before the swap", before, bin)
	}
	other := copyBinary(t, dir, "other")
	if err := os.Rename(other, bin); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	after, err := Capture(pid)
	if err != nil {
		t.Fatal(err)
	}
	if raw != bin+" (deleted)" || after.Executable != bin || !SameExecutable(after.Executable, bin) {
		t.Errorf("replaced binary: /proc exe %q, captured %q: want %q (deleted), same path", raw, after.Executable, bin)
	}
	if RunsBinary(after, bin) {
		t.Errorf("pid %d runs file %s, %s is now another file: accepted as running it", pid, after.ExecutableFile, bin)
	}
	if v := Observe(before); v != Ours {
		t.Errorf("the tuple recorded before the swap: %s, want ours", v)
	}
}
