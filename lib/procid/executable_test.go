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

	"barn.dev/lib/state"
)

// installBinary puts a copy of this test binary at dir/name (a hard link
// when possible) and returns its path: a second executable file whose
// processes sleep like sleeper's.
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
	mimic := installBinary(t, dir, "mimic")
	uuid := fmt.Sprintf("6a1c2f0e-7d3b-4e59-8b21-%012x", time.Now().UnixNano()&0xffffffffffff)
	inv := state.Invocation{Binary: qemu, Args: []string{"-name", "n1", "-uuid", uuid}}
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
// runs literally or through symlinks resolved now; a binary replaced
// since the process started (a package upgrade: /proc/<pid>/exe then
// ends in " (deleted)") is still the file it was started from.
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
	if p.Executable != bin || !SameExecutable(p.Executable, link) || !SameExecutable(p.Executable, bin) {
		t.Errorf("started through symlink %s: exe %q, want %q and both names accepted", link, p.Executable, bin)
	}
	if SameExecutable(p.Executable, filepath.Join(dir, "other")) || SameExecutable(p.Executable, "") {
		t.Error("another path was accepted as the binary")
	}

	// the upgrade: the file is replaced by a new one at the same path
	pid := spawn(t, bin, bin, "-name", "n2")
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	installBinary(t, dir, "qemu-system-x86_64")
	raw, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	up, err := Capture(pid)
	if err != nil {
		t.Fatal(err)
	}
	if raw != bin+" (deleted)" || up.Executable != bin || !SameExecutable(up.Executable, bin) {
		t.Errorf("replaced binary: /proc exe %q, captured %q: want %q (deleted) still accepted as %s", raw, up.Executable, bin, bin)
	}
}
