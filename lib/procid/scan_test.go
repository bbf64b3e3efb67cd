package procid

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"barn.dev/lib/vmrecord"
)

// helperEnv makes this test binary, re-executed, sleep with whatever argv
// it was given (TestMain), standing in for a QEMU with Barn's argv.
const helperEnv = "PROCID_TEST_SLEEPER"

// connectEnv makes it connect to the unix socket it names first, then
// sleep holding the connection.
const connectEnv = "PROCID_TEST_CONNECT"

func TestMain(m *testing.M) {
	if sock := os.Getenv(connectEnv); sock != "" {
		c, err := net.Dial("unix", sock)
		if err != nil {
			os.Exit(3)
		}
		defer c.Close()
		time.Sleep(60 * time.Second)
		os.Exit(0)
	}
	if os.Getenv(helperEnv) == "1" {
		time.Sleep(60 * time.Second)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// sleeper runs this test binary as argv[0] with args and returns its PID.
func sleeper(t *testing.T, args ...string) int {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command(self, args...)
	c.Env = append(os.Environ(), helperEnv+"=1")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	// Wait until exec is done: the command line is the one we gave.
	for i := 0; i < 200; i++ {
		if b, _ := os.ReadFile("/proc/" + strconv.Itoa(c.Process.Pid) + "/cmdline"); len(b) > 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	return c.Process.Pid
}

// TestFindByBarnsArgv: the process table shows a node's QEMU by what
// Barn's argv says about it (its VM UUID, its runtime paths), whatever the
// pidfile says; only a byte-exact argv is the recorded invocation, and a
// process that merely names the node (another deployment's node of the
// same name) is not a claim at all.
func TestFindByBarnsArgv(t *testing.T) {
	self, _ := os.Executable()
	dir := t.TempDir()
	uuid := fmt.Sprintf("3d0f6a52-8d0e-4c43-9a55-%012x", time.Now().UnixNano()&0xffffffffffff) // unique to this run
	pidfile, qmpSock, barnSock := filepath.Join(dir, "qemu.pid"), filepath.Join(dir, "qmp.sock"), filepath.Join(dir, "barn-qmp.sock")
	inv := vmrecord.Invocation{Binary: self, Args: []string{"-name", "n1", "-uuid", uuid,
		"-qmp", "unix:" + qmpSock + ",server=on,wait=off",
		"-chardev", "socket,id=barn-qmp,path=" + barnSock + ",server=on,wait=off",
		"-pidfile", pidfile}}
	claim := Claim{UUID: uuid, Paths: []string{pidfile, qmpSock, barnSock}}

	if tab, err := Find(claim, inv); err != nil || !tab.Absent() || tab.Sole() != nil {
		t.Fatalf("before anything runs: %+v %v, want absent", tab, err)
	}
	sleeper(t, "-name", "n1", "-uuid", "00000000-0000-4000-8000-000000000000") // same name, another VM
	if tab, _ := Find(claim, inv); !tab.Absent() {
		t.Fatalf("a process sharing only the node name claimed it: %+v", tab)
	}

	exact := sleeper(t, inv.Args...)
	tab, err := Find(claim, inv)
	if err != nil {
		t.Fatal(err)
	}
	sole := tab.Sole()
	if sole == nil || sole.PID != exact || sole.ArgvHash != ArgvHash(inv) || Observe(*sole) != Ours {
		t.Fatalf("exact invocation: %+v, want pid %d as the sole, exact match", tab, exact)
	}

	for name, args := range map[string][]string{
		"uuid (upper case)": {"-uuid", "X", "-uuid", upper(uuid)},
		"pidfile":           {"-pidfile", pidfile},
		"qmp socket":        {"-qmp", "unix:" + qmpSock},
		"chardev socket":    {"-chardev", "socket,id=x,path=" + barnSock + ",server=on"},
	} {
		t.Run(name, func(t *testing.T) {
			other := sleeper(t, args...)
			tab, _ := Find(claim, inv)
			if tab.Absent() || tab.Sole() != nil || len(tab.Matches) != 2 {
				t.Fatalf("%+v: want two claimants and no sole match", tab)
			}
			for _, m := range tab.Matches {
				if m.PID == other && m.Exact {
					t.Errorf("pid %d (%q) counted as the exact invocation", other, args)
				}
			}
		})
	}
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 32
		}
	}
	return string(b)
}

// TestFindNeverProvesAbsenceItCannotSee: a process of this user whose
// command line cannot be read might be the node's QEMU, so the table is
// not proof of absence; kernel threads and zombies are no QEMU.
func TestFindNeverProvesAbsenceItCannotSee(t *testing.T) {
	root, write := fakeProcRoot(t)
	stat := func(pid int, state string, flags int) string { return statLine(pid, "x", state, flags, 1, "12345") }
	write("2/stat", stat(2, "S", pfKthread)) // kthreadd: empty cmdline
	write("2/cmdline", "")
	write("7/stat", stat(7, "Z", 0)) // a zombie
	write("7/cmdline", "")
	write("9/stat", stat(9, "S", 0)) // an ordinary process
	write("9/cmdline", "bash\x00")
	write("self", "not a process")
	claim := Claim{UUID: "0b5f0a3e-8a4c-4f55-9a43-4a3b8f0d2f11"}
	if tab, err := Find(claim, vmrecord.Invocation{}); err != nil || !tab.Absent() {
		t.Fatalf("kernel thread, zombie, bash: %+v %v, want absent", tab, err)
	}
	// This user's process whose cmdline cannot be read (here: a directory).
	os.MkdirAll(root+"/11/cmdline", 0o755)
	write("11/stat", stat(11, "S", 0))
	tab, err := Find(claim, vmrecord.Invocation{})
	if err != nil || tab.Absent() || len(tab.Unreadable) != 1 || tab.Unreadable[0] != 11 {
		t.Fatalf("an unreadable process of ours: %+v %v, want not absent, pid 11 unreadable", tab, err)
	}
}

// TestSocketClients names the process holding a connection to a socket
// (an operator's session on a QMP monitor), and not the listener's owner.
func TestSocketClients(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "mon.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if got, err := SocketClients(sock); err != nil || len(got) != 0 {
		t.Fatalf("no client yet: %v %v", got, err)
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	self, _ := os.Executable()
	c := exec.Command(self)
	c.Env = append(os.Environ(), connectEnv+"="+sock)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	select {
	case conn := <-accepted:
		defer conn.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("the client never connected")
	}
	got, err := SocketClients(sock)
	if err != nil || len(got) != 1 || got[0] != c.Process.Pid {
		t.Fatalf("SocketClients = %v %v, want [%d]", got, err, c.Process.Pid)
	}
}

// A process reaped between the open and the read of its command line
// answers ESRCH: it is gone, never "could not be read" (which keeps a
// node unproven and refuses its start).
func TestExitingProcessIsGone(t *testing.T) {
	for _, err := range []error{fs.ErrNotExist, unix.ESRCH} {
		if e := procErr(42, "cmdline", err); !errors.Is(e, ErrNoProcess) {
			t.Errorf("%v: %v, want ErrNoProcess", err, e)
		}
	}
	if e := procErr(42, "cmdline", fs.ErrPermission); errors.Is(e, ErrNoProcess) {
		t.Errorf("EACCES read as gone: %v", e)
	}
}

// TestZombieLeaderWithLiveThreadsIsNotGone: a process whose main thread
// exited (a zombie, empty command line) while another of its threads
// still runs — pthread_exit in main, or the middle of its exit — may be
// the node's QEMU holding its disks: not absent, not dead, not captured.
// Once every thread has ended it is gone.
func TestZombieLeaderWithLiveThreadsIsNotGone(t *testing.T) {
	_, write := fakeProcRoot(t)
	stat := func(pid int, state string, threads int) string {
		return statLine(pid, "qemu", state, 0, threads, "12345")
	}
	write("7/stat", stat(7, "Z", 2))
	write("7/cmdline", "")
	write("7/task/7/stat", stat(7, "Z", 2))
	write("7/task/8/stat", stat(8, "S", 2))
	claim := Claim{UUID: "0b5f0a3e-8a4c-4f55-9a43-4a3b8f0d2f11"}
	recorded := vmrecord.Process{PID: 7, Boot: "b00t", Started: "procstat:12345", Executable: "/usr/bin/qemu-system-x86_64", ExecutableFile: "dev:ino"}

	// Its argv, read through the live thread, makes the claim: a claimant
	// whose identity cannot be captured, never the sole match.
	write("7/task/8/cmdline", "qemu-system-x86_64\x00-uuid\x00"+claim.UUID+"\x00")
	tab, err := Find(claim, vmrecord.Invocation{})
	if err != nil || tab.Absent() || tab.Sole() != nil || len(tab.Matches) != 1 || tab.Matches[0].PID != 7 || tab.Matches[0].Process != nil {
		t.Fatalf("a live thread under a zombie leader: %+v %v, want pid 7 claiming, uncaptured", tab, err)
	}
	// Another program's: no claimant.
	write("7/task/8/cmdline", "bash\x00")
	if tab, err := Find(claim, vmrecord.Invocation{}); err != nil || !tab.Absent() {
		t.Fatalf("bash with a zombie leader: %+v %v, want absent", tab, err)
	}
	if !Alive(7) {
		t.Error("Alive(7) = false with a live thread")
	}
	if _, err := Capture(7); err == nil || errors.Is(err, ErrNoProcess) {
		t.Errorf("Capture(7) = %v, want an error that is not ErrNoProcess", err)
	}
	if v := Observe(recorded); v != Unknown {
		t.Errorf("Observe = %s, want unknown", v)
	}

	write("7/stat", stat(7, "Z", 1)) // the last other thread is released
	write("7/task/8/stat", stat(8, "Z", 1))
	if tab, err := Find(claim, vmrecord.Invocation{}); err != nil || !tab.Absent() {
		t.Fatalf("every thread ended: %+v %v, want absent", tab, err)
	}
	if Alive(7) {
		t.Error("Alive(7) = true with every thread ended")
	}
	if _, err := Capture(7); !errors.Is(err, ErrNoProcess) {
		t.Errorf("Capture(7) = %v, want ErrNoProcess", err)
	}
	if v := Observe(recorded); v != Dead {
		t.Errorf("Observe = %s, want dead", v)
	}
}
