package procid

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"barn.dev/lib/vmrecord"
)

func startSleep(t *testing.T) *exec.Cmd {
	t.Helper()
	c := exec.Command("sleep", "60")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	return c
}

func TestArgvHashIsCmdlineDigest(t *testing.T) {
	inv := vmrecord.Invocation{Binary: "/usr/bin/qemu", Args: []string{"-name", "n1"}}
	sum := sha256.Sum256([]byte("/usr/bin/qemu\x00-name\x00n1\x00"))
	if got := ArgvHash(inv); got != hex.EncodeToString(sum[:]) {
		t.Fatalf("ArgvHash = %s", got)
	}
	// Bound to the live process: a process started with that argv has it.
	c := startSleep(t)
	p, err := Capture(c.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if want := ArgvHash(vmrecord.Invocation{Binary: "sleep", Args: []string{"60"}}); p.ArgvHash != want {
		t.Fatalf("captured argv hash %s, want %s", p.ArgvHash, want)
	}
}

func TestCaptureTuple(t *testing.T) {
	c := startSleep(t)
	p, err := Capture(c.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	sleepBin, _ := exec.LookPath("sleep")
	sleepBin, _ = filepath.EvalSymlinks(sleepBin)
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if p.PID != c.Process.Pid || p.Executable != sleepBin || !strings.HasPrefix(p.Started, "procstat:") ||
		p.Boot != strings.TrimSpace(string(boot)) || len(p.ArgvHash) != 64 {
		t.Fatalf("tuple %+v (sleep is %s)", p, sleepBin)
	}
	again, _ := Capture(c.Process.Pid)
	if again != p {
		t.Fatalf("tuple changed between captures: %+v vs %+v", again, p)
	}
}

func TestObserveVerdicts(t *testing.T) {
	c := startSleep(t)
	p, err := Capture(c.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	mod := func(f func(*vmrecord.Process)) vmrecord.Process { q := p; f(&q); return q }
	cases := []struct {
		name string
		p    vmrecord.Process
		want Verdict
	}{
		{"same", p, Ours},
		{"other start time", mod(func(q *vmrecord.Process) { q.Started = "procstat:1" }), Foreign},
		{"other executable", mod(func(q *vmrecord.Process) { q.Executable = "/usr/bin/qemu-system-x86_64" }), Foreign},
		{"other executable file, same path", mod(func(q *vmrecord.Process) { q.ExecutableFile = "1:2" }), Foreign},
		{"no executable file recorded", mod(func(q *vmrecord.Process) { q.ExecutableFile = "" }), Unknown},
		{"other boot", mod(func(q *vmrecord.Process) { q.Boot = "11111111-2222-3333-4444-555555555555" }), Foreign},
		{"other argv, same start and exe", mod(func(q *vmrecord.Process) { q.ArgvHash = strings.Repeat("0", 64) }), Unknown},
		{"no boot recorded", mod(func(q *vmrecord.Process) { q.Boot = "" }), Unknown},
		{"pid 0", mod(func(q *vmrecord.Process) { q.PID = 0 }), Unknown},
	}
	for _, c := range cases {
		if got := Observe(c.p); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	c.Process.Kill()
	c.Wait()
	if got := Observe(p); got != Dead {
		t.Errorf("after kill: %s, want dead", got)
	}
	if _, err := Capture(p.PID); !errors.Is(err, ErrNoProcess) {
		t.Errorf("Capture after kill: %v", err)
	}
}

func TestZombieIsDead(t *testing.T) {
	c := exec.Command("sleep", "0.05")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Wait()
	p, err := Capture(c.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for Alive(p.PID) {
		if time.Now().After(deadline) {
			t.Fatalf("sleep 0.05 (pid %d) still runs a minute later", p.PID)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Not reaped yet: /proc/<pid> exists in state Z.
	if _, err := os.Stat("/proc/" + itoa(p.PID)); err != nil {
		t.Fatalf("expected an unreaped zombie: %v", err)
	}
	if got := Observe(p); got != Dead {
		t.Fatalf("zombie: %s, want dead", got)
	}
}

func TestStatParsesHostileComm(t *testing.T) {
	_, write := fakeProcRoot(t)
	// comm "a) S 1 (x" tries to shift the fields.
	write("42/stat", statLine(42, "a) S 1 (x", "S", 4194560, 1, "987654"))
	st, err := readStat(42)
	if err != nil || st.state != "S" || st.start != "987654" {
		t.Fatalf("readStat = %+v, %v", st, err)
	}
	write("42/stat", "42 (a) S 1\n")
	if _, err := readStat(42); err == nil {
		t.Fatal("short stat accepted")
	}
}

// TestExitingIsUnknownUntilGone: a process whose memory is already
// released (no /proc/<pid>/exe) but whose threads remain is not Dead yet,
// so Observe never says Dead and then Unknown of one process (a stop
// followed at once by an audit saw exactly that). Exiting tells its
// teardown (every thread PF_EXITING or ended) from a main thread that
// called pthread_exit while another thread runs on.
func TestExitingIsUnknownUntilGone(t *testing.T) {
	p, proc := fakeProc(t)
	for _, c := range []struct {
		name    string
		tasks   []task // pid 42's threads, the main one first
		want    Verdict
		exiting bool
	}{
		{"memory released", []task{{"R", pfExiting}, {"R", pfExiting}, {"D", pfExiting}}, Unknown, true},
		{"main thread a zombie", []task{{"Z", pfExiting}, {"R", pfExiting}}, Unknown, true},
		{"pthread_exit in main", []task{{"Z", pfExiting}, {"S", 0}}, Unknown, false},
		{"gone", []task{{"Z", pfExiting}}, Dead, false},
	} {
		proc("987654", c.tasks...)
		if got := Observe(p); got != c.want {
			t.Errorf("%s, no exe link: %s, want %s", c.name, got, c.want)
		}
		if got := Exiting(p); got != c.exiting {
			t.Errorf("%s: Exiting %v, want %v", c.name, got, c.exiting)
		}
	}
	proc("111", task{"R", pfExiting}, task{"R", pfExiting}) // another process now has the pid
	if Exiting(p) {
		t.Error("Exiting of another process at the recorded pid")
	}
	proc("987654", task{"R", pfExiting}, task{"R", pfExiting})
	if incomplete := (vmrecord.Process{PID: 42, Boot: "b00t", Started: "procstat:987654"}); Exiting(incomplete) {
		t.Error("Exiting of an incomplete tuple")
	}
}

// Exiting reads each thread after listing them: a thread started
// meanwhile (here 44, by worker 43 before 43's exit began, while the
// main thread had called pthread_exit) runs user code, and a pid reused
// meanwhile is another process. blockTask makes the read of task 43's
// stat wait for change, then answer 43 as exiting.
func TestExitingRereadsWhatChangedWhileReading(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(write func(path, body string))
	}{
		{"a thread started", func(write func(path, body string)) {
			write("42/task/44/stat", statLine(44, "qemu", "R", 0, 3, "987654"))
		}},
		{"the pid reused", func(write func(path, body string)) {
			write("42/stat", statLine(42, "qemu", "R", pfExiting, 2, "111"))
		}},
	} {
		p, proc := fakeProc(t)
		proc("987654", task{"Z", pfExiting}, task{"S", 0})
		write := writeProc(t)
		done := blockTask(t, "42/task/43/stat", func() { c.change(write) }, statLine(43, "qemu", "R", pfExiting, 2, "987654"))
		got := Exiting(p)
		<-done
		if got {
			t.Errorf("%s while the threads were read: Exiting = true", c.name)
		}
	}
}

// blockTask replaces the file at path (under procRoot) with a FIFO whose
// reader gets body only after change has run; done closes once written.
func blockTask(t *testing.T, path string, change func(), body string) (done chan struct{}) {
	t.Helper()
	fifo := filepath.Join(procRoot, path)
	os.Remove(fifo)
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done = make(chan struct{})
	go func() {
		defer close(done)
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0) // once the reader has opened it
		if err != nil {
			t.Error(err)
			return
		}
		defer w.Close()
		change()
		w.WriteString(body)
	}()
	return done
}

// A missing exe link is "no process" only on the stat's word: when the
// stat cannot be read either, that proves nothing.
func TestMissingExeWithUnreadableStatIsNotGone(t *testing.T) {
	fakeProc(t)
	os.Remove(procRoot + "/42/stat")
	if err := os.Mkdir(procRoot+"/42/stat", 0o755); err != nil { // reads fail with EISDIR
		t.Fatal(err)
	}
	err := exeErr(42, fs.ErrNotExist)
	if errors.Is(err, ErrNoProcess) || errors.Is(err, errExiting) {
		t.Fatalf("exeErr = %v, want an error that proves nothing", err)
	}
	if !Alive(42) {
		t.Error("Alive of a pid whose stat cannot be read: false, want true (not proven gone)")
	}
	if Alive(43) {
		t.Error("Alive of a pid with no /proc entry")
	}
}

// fakeProc points procRoot at a fixture: boot id b00t, pid 42 with a
// command line and no exe link (its memory released), and p, a tuple
// recorded of it. proc(start, tasks...) writes pid 42's stat (the main
// thread's state, the thread count) and one task/<tid>/stat per thread
// (the main thread first).
func fakeProc(t *testing.T) (p vmrecord.Process, proc func(start string, tasks ...task)) {
	root, write := fakeProcRoot(t)
	write("42/cmdline", "qemu\x00")
	proc = func(start string, tasks ...task) {
		t.Helper()
		os.RemoveAll(root + "/42/task")
		write("42/stat", statLine(42, "qemu", tasks[0].state, tasks[0].flags, len(tasks), start))
		for i, th := range tasks {
			write(fmt.Sprintf("42/task/%d/stat", 42+i), statLine(42+i, "qemu", th.state, th.flags, len(tasks), start))
		}
	}
	proc("987654", task{"R", 4194560})
	return vmrecord.Process{PID: 42, Boot: "b00t", Started: "procstat:987654", Executable: "/usr/bin/qemu", ExecutableFile: "1:2"}, proc
}

// task is one thread of a fakeProc: its state and stat flags.
type task struct {
	state string
	flags int
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestFrozen: a process is frozen only while every thread is stopped.
func TestFrozen(t *testing.T) {
	c := startSleep(t)
	pid := c.Process.Pid
	if Frozen(pid) {
		t.Fatal("a sleeping process reported frozen")
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !Frozen(pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !Frozen(pid) {
		t.Fatal("a SIGSTOPped process is not reported frozen")
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for Frozen(pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if Frozen(pid) {
		t.Error("a continued process is still reported frozen")
	}
	if Frozen(1 << 30) {
		t.Error("a missing process reported frozen")
	}
}
