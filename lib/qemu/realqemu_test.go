package qemu

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"barn.dev/lib/imageref"
	"barn.dev/lib/internal/testport"
	"barn.dev/lib/qmp"
	"barn.dev/lib/vmrecord"
)

// TestInvocationStartsRealQEMUUnderOddPaths: the argv Invocation builds
// for a state root and runtime directory whose names hold spaces, commas,
// '#', both quotes and non-ASCII text is accepted by the real
// qemu-system-x86_64 (UEFI, so pflash -drive values too; paused with -S):
// it daemonizes, writes its pidfile, answers QMP on the socket at exactly
// its path with the node's name and UUID, opens every disk at exactly its
// path and writes the serial log where Barn reads it.
func TestInvocationStartsRealQEMUUnderOddPaths(t *testing.T) {
	bin, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Skip("qemu-system-x86_64 is not installed")
	}
	const code, vars = "/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"
	if _, err := os.Stat(code); err != nil {
		t.Skip("OVMF is not installed")
	}
	base := t.TempDir()
	dir := filepath.Join(base, `barn home, #1 'q' "d" é`, "nodes", "pg-meta-1")
	rtBase, err := os.MkdirTemp("/tmp", "rt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(rtBase) })
	rt := filepath.Join(rtBase, `rt,x #2 'é'`, "pg-meta-1")
	for _, d := range []string{dir, rt} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	in := baseInput()
	in.RootDisk, in.Seed, in.SerialLog, in.QEMULog = dir+"/root.qcow2", dir+"/seed,1.iso", dir+"/serial.log", dir+"/qemu.log"
	in.Base = filepath.Join(base, `images, #3 é`, "d12.qcow2")
	in.Runtime = vmrecord.Runtime{Directory: rt, QMP: rt + "/qmp.sock", BarnQMP: rt + "/barn,qmp.sock", Pidfile: rt + "/qemu.pid"}
	in.Image.Boot, in.Firmware, in.NVRAM = "uefi", code, dir+"/nvram,x.fd"
	in.DataDisks = []vmrecord.DataDisk{{Name: "data", Path: dir + "/data,1 #.qcow2", Serial: "x4bq2mzk7dfa3wq5nrt2"}}
	in.Node.MemoryBytes = 512 << 20
	if err := os.MkdirAll(filepath.Dir(in.Base), 0o700); err != nil {
		t.Fatal(err)
	}
	qemuImg(t, "create", "-q", "-f", "qcow2", in.Base, "16M")
	qemuImg(t, "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", in.Base, in.RootDisk, "16M")
	qemuImg(t, "create", "-q", "-f", "qcow2", in.DataDisks[0].Path, "16M")
	if err := os.WriteFile(in.Seed, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	nv, err := os.ReadFile(vars)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in.NVRAM, nv, 0o600); err != nil {
		t.Fatal(err)
	}
	mon, pid := startPaused(t, bin, in)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := mon.Verify(ctx, in.Node.Name, in.VMUUID); err != nil {
		t.Fatalf("QMP identity on %s: %v", in.Runtime.QMP, err)
	}
	var blocks []struct {
		Inserted *struct {
			File string `json:"file"`
		} `json:"inserted"`
	}
	if err := mon.Execute(ctx, "query-block", nil, &blocks); err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, b := range blocks {
		if b.Inserted != nil {
			files = append(files, b.Inserted.File)
		}
	}
	want := []string{in.RootDisk, in.DataDisks[0].Path, in.Seed, in.Firmware, in.NVRAM}
	sort.Strings(files)
	sort.Strings(want)
	if strings.Join(files, "\n") != strings.Join(want, "\n") {
		t.Errorf("QEMU opened\n%s\nwant\n%s", strings.Join(files, "\n"), strings.Join(want, "\n"))
	}
	if _, err := os.Stat(in.SerialLog); err != nil {
		t.Errorf("serial log: %v", err)
	}
	if err := mon.Execute(ctx, "quit", nil, nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; syscall.Kill(pid, 0) == nil; i++ {
		if i > 100 {
			t.Fatal("QEMU did not exit after quit")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Nothing landed beside the intended files (a mis-split path would).
	for _, d := range []string{filepath.Dir(dir), rtBase, filepath.Dir(in.Base)} {
		ents, _ := os.ReadDir(d)
		if len(ents) != 1 {
			t.Errorf("%s holds %d entries, want 1", d, len(ents))
		}
	}
}

func qemuImg(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("qemu-img", args...).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img %s: %v %s", strings.Join(args, " "), err, out)
	}
}

// TestRealQEMUNeverOpensASwappedBackingFile: the root overlay's header is
// rewritten to back onto another file (qemu-img rebase -u, what anyone who
// can write the overlay can do). The real qemu-system-x86_64 started with
// Invocation's argv opens the verified base the argv names as the
// overlay's backing node and never the file the header names
// (query-named-block-nodes lists every node QEMU opened, and names the
// file of each); data disks rewritten the same way get no backing at all.
func TestRealQEMUNeverOpensASwappedBackingFile(t *testing.T) {
	bin, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Skip("qemu-system-x86_64 is not installed")
	}
	dir := t.TempDir()
	rtDir, err := os.MkdirTemp("/tmp", "rt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(rtDir) })
	in := baseInput()
	in.Base, in.RootDisk, in.Seed, in.SerialLog, in.QEMULog = dir+"/base.qcow2", dir+"/root.qcow2", dir+"/seed.iso", dir+"/serial.log", dir+"/qemu.log"
	in.Runtime = vmrecord.Runtime{Directory: rtDir, QMP: rtDir + "/qmp.sock", BarnQMP: rtDir + "/barn.sock", Pidfile: rtDir + "/qemu.pid"}
	in.DataDisks = []vmrecord.DataDisk{{Name: "data", Path: dir + "/data.qcow2", Serial: "x4bq2mzk7dfa3wq5nrt2"}}
	in.Node.MemoryBytes = 512 << 20
	unverified := dir + "/unverified.qcow2"
	qemuImg(t, "create", "-q", "-f", "qcow2", in.Base, "16M")
	qemuImg(t, "create", "-q", "-f", "qcow2", unverified, "16M")
	qemuImg(t, "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", in.Base, in.RootDisk, "32M")
	qemuImg(t, "rebase", "-u", "-F", "qcow2", "-b", unverified, in.RootDisk)
	qemuImg(t, "create", "-q", "-f", "qcow2", in.DataDisks[0].Path, "16M")
	qemuImg(t, "rebase", "-u", "-F", "qcow2", "-b", unverified, in.DataDisks[0].Path)
	if err := os.WriteFile(in.Seed, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	mon, _ := startPaused(t, bin, in)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var nodes []struct {
		NodeName string `json:"node-name"`
		File     string `json:"file"`
		Image    struct {
			BackingFilename string `json:"backing-filename"`
		} `json:"image"`
	}
	if err := mon.Execute(ctx, "query-named-block-nodes", nil, &nodes); err != nil {
		t.Fatal(err)
	}
	opened := map[string]string{}
	for _, n := range nodes {
		opened[n.NodeName] = n.File
		if strings.Contains(n.File, unverified) {
			t.Errorf("QEMU opened the swapped-in backing file %s as node %s", unverified, n.NodeName)
		}
	}
	for node, want := range map[string]string{"base-file": in.Base, "base": in.Base, "root-file": in.RootDisk, "disk0-file": in.DataDisks[0].Path} {
		if opened[node] != want {
			t.Errorf("node %s opened %q, want %q (all: %v)", node, opened[node], want, opened)
		}
	}
	if err := mon.Execute(ctx, "quit", nil, nil); err != nil {
		t.Fatal(err)
	}
}

// startPaused runs the TCG invocation of in with bin as a daemonized,
// paused (-S) QEMU, kills it when the test ends, and returns its QMP
// monitor and pid; a refused argv fails the test with QEMU's message and
// the argv.
func startPaused(t *testing.T, bin string, in Input) (qmp.Monitor, int) {
	t.Helper()
	p := tcgProfile()
	p.Binary = bin
	return startPausedWith(t, in, p)
}

// startPausedWith starts in under p paused (-S), with files inherited
// from descriptor 3 on, and returns its operators' monitor and PID
// (killed at cleanup). The management forward gets a port the kernel has
// just handed out: a fixed one (2222) collides with the real QEMU other
// packages' tests start in parallel, and QEMU then exits 1 with its
// reason only in its -D log, which a refusal here prints.
func startPausedWith(t *testing.T, in Input, p Profile, files ...*os.File) (qmp.Monitor, int) {
	t.Helper()
	in.SSHPort = testport.Free(t)
	inv, err := Invocation(in, p)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(inv.Binary, append(inv.Args, "-S")...)
	cmd.ExtraFiles = files
	if out, err := cmd.CombinedOutput(); err != nil {
		qlog, _ := os.ReadFile(in.QEMULog)
		t.Fatalf("%s refused the argv: %v\n%s\nqemu.log: %s\n%s", filepath.Base(inv.Binary), err, out, qlog, strings.Join(Lines(inv), "\n"))
	}
	pidText, err := os.ReadFile(in.Runtime.Pidfile)
	if err != nil {
		t.Fatalf("pidfile: %v", err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(pidText)))
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) }) // the daemon this test started
	return qmp.Monitor{Socket: in.Runtime.QMP}, pid
}

// TestArm64InvocationStartsRealQEMU: the arm64 argv (qemu-system-aarch64,
// virt, CPU max, multi-threaded TCG, AAVMF code read-only and the node's
// own vars, the NICs at their pinned pcie.0 slots, a data disk, the seed
// and a 9p share) is accepted by the real emulator: paused with -S it
// answers QMP with the node's name and UUID and has opened exactly the
// intended files.
func TestArm64InvocationStartsRealQEMU(t *testing.T) {
	if HostArch() != "amd64" {
		t.Skip("the arm64-on-amd64 profile is this host's only foreign one when the host is amd64")
	}
	p, err := ForeignProfile(tcgProfile(), "arm64", "amd64", exec.LookPath)
	if err != nil {
		t.Skip("qemu-system-aarch64 is not installed (scripts/install-deps.sh installs qemu-system-arm): ", err)
	}
	fw, err := FindFirmwareOf(Targets["arm64"], nil)
	if err != nil {
		t.Skip("AAVMF is not installed (qemu-efi-aarch64): ", err)
	}
	dir, rt := t.TempDir(), t.TempDir()
	in := baseInput()
	in.Image = imageref.Identity{Image: "d12", Version: "12.4", Arch: "arm64", Boot: "uefi"}
	in.RootDisk, in.Seed, in.SerialLog, in.QEMULog, in.Base = dir+"/root.qcow2", dir+"/seed.iso", dir+"/serial.log", dir+"/qemu.log", dir+"/base.qcow2"
	in.Runtime = vmrecord.Runtime{Directory: rt, QMP: rt + "/qmp.sock", BarnQMP: rt + "/barn-qmp.sock", Pidfile: rt + "/qemu.pid"}
	in.Firmware, in.NVRAM = fw.Code, dir+"/nvram.fd"
	in.DataDisks = []vmrecord.DataDisk{{Name: "data", Path: dir + "/data.qcow2", Serial: "x4bq2mzk7dfa3wq5nrt2"}}
	in.Node.MemoryBytes = 512 << 20
	qemuImg(t, "create", "-q", "-f", "qcow2", in.Base, "16M")
	qemuImg(t, "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", in.Base, in.RootDisk, "16M")
	qemuImg(t, "create", "-q", "-f", "qcow2", in.DataDisks[0].Path, "16M")
	if err := os.WriteFile(in.Seed, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	nv, err := os.ReadFile(fw.Vars)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in.NVRAM, nv, 0o600); err != nil {
		t.Fatal(err)
	}
	share, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer share.Close()
	in.Shares = []ShareFD{{Tag: "barn-0123456789abcdef0123", FD: 3}}
	mon, _ := startPausedWith(t, in, p, share)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := mon.Verify(ctx, in.Node.Name, in.VMUUID); err != nil {
		t.Fatalf("QMP identity: %v", err)
	}
	var blocks []struct {
		Inserted *struct {
			File string `json:"file"`
		} `json:"inserted"`
	}
	if err := mon.Execute(ctx, "query-block", nil, &blocks); err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, b := range blocks {
		if b.Inserted != nil {
			files = append(files, b.Inserted.File)
		}
	}
	want := []string{in.RootDisk, in.DataDisks[0].Path, in.Seed, in.Firmware, in.NVRAM}
	sort.Strings(files)
	sort.Strings(want)
	if strings.Join(files, "\n") != strings.Join(want, "\n") {
		t.Errorf("QEMU opened\n%s\nwant\n%s", strings.Join(files, "\n"), strings.Join(want, "\n"))
	}
	_ = mon.Execute(ctx, "quit", nil, nil)
}
