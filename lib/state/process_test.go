package state

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"barn.dev/lib/exitcode"
)

// The lock and crash tests run real processes: the test binary re-executes
// itself with BARN_STATE_HELPER set, and TestMain runs the helper instead
// of the tests.

const helperEnv = "BARN_STATE_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	os.Exit(m.Run())
}

func runHelper(mode string) int {
	r, err := Open(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	switch mode {
	case "increment": // take the deployment lock N times; read, bump generation, write
		n, _ := strconv.Atoi(os.Getenv("HELPER_N"))
		for i := 0; i < n; i++ {
			l, err := r.LockDeployment(ctx, "helper increment", true, nil)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			d, err := r.ReadDeployment()
			if err != nil || d == nil {
				fmt.Fprintln(os.Stderr, "read:", d, err)
				return 1
			}
			d.Generation++
			if err := r.WriteDeployment(d); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			if err := r.AppendEvent(Event{Action: "increment", Message: fmt.Sprint("gen ", d.Generation), OperationID: "helper-op-1"}); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			if err := l.Unlock(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		return 0
	case "hold": // take the deployment lock, say so, then sleep until killed
		if _, err := r.LockDeployment(ctx, "barn-node apply", false, nil); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println("locked")
		time.Sleep(time.Minute)
		return 0
	case "wait": // wait for the deployment lock, printing the holder
		r.LockWait, _ = time.ParseDuration(os.Getenv("HELPER_WAIT"))
		l, err := r.LockDeployment(ctx, "barn-node stop", true, func(h LockHolder) {
			fmt.Fprintln(os.Stderr, h.WaitingMessage())
		})
		if err != nil {
			e := exitcode.As(err)
			fmt.Fprintf(os.Stderr, "error: %s %s: %s\n", e.Class, e.Reason, e.Message)
			return e.Class.Code()
		}
		fmt.Println("acquired")
		return exitcode.OK.Code() + boolInt(l.Unlock() != nil)
	case "rewrite": // rewrite the deployment forever with growing generations
		d, err := r.ReadDeployment()
		if err != nil || d == nil {
			fmt.Fprintln(os.Stderr, "read:", err)
			return 1
		}
		for first := true; ; first = false {
			d.Generation++
			// Vary the size so a torn write would show.
			d.Spec.Nodes[0].Aliases = []string{strings.Repeat("a", int(d.Generation%4000))}
			d.Spec.Seal()
			if err := r.WriteDeployment(d); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			if first {
				fmt.Println("ready") // one write committed: the kill lands mid-stream
			}
		}
	}
	fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
	return 2
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func helperCmd(t *testing.T, r *Root, mode string, extra ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, "BARN_HOME="+r.Dir, "BARN_RUNTIME_DIR="+r.RuntimeDir)
	cmd.Env = append(cmd.Env, extra...)
	return cmd
}

// startHolder starts a "hold" helper and waits until it has the lock.
func startHolder(t *testing.T, r *Root) *exec.Cmd {
	t.Helper()
	cmd := helperCmd(t, r, "hold")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("holder said %q, %v", line, err)
	}
	return cmd
}

func TestConcurrentWritersLeaveOneConsistentDocument(t *testing.T) {
	r := testRoot(t)
	if err := r.WriteDeployment(&Deployment{Generation: 1, Spec: testSpec("pg-1", "pg-2")}); err != nil {
		t.Fatal(err)
	}
	const writers, each = 10, 20
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := 0; i < writers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := helperCmd(t, r, "increment", "HELPER_N="+strconv.Itoa(each))
			if out, err := cmd.CombinedOutput(); err != nil {
				errs <- fmt.Errorf("writer: %v: %s", err, out)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	d, err := r.ReadDeployment()
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(1 + writers*each); d.Generation != want {
		t.Fatalf("generation = %d, want %d: a read-modify-write was lost", d.Generation, want)
	}
	events, err := r.ReadEvents(EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != writers*each {
		t.Fatalf("%d events, want %d", len(events), writers*each)
	}
	if h, err := r.Holder(LockDeploymentName); h != nil || err != nil {
		t.Fatalf("holder after all writers finished = %+v, %v", h, err)
	}
	if p := r.Verify(); len(p) != 0 {
		t.Fatalf("verify: %v", p)
	}
}

func TestBusyLockNamesHolderAndKilledHolderFreesIt(t *testing.T) {
	r := testRoot(t)
	holder := startHolder(t, r)

	h, err := r.Holder(LockDeploymentName)
	if err != nil || h == nil {
		t.Fatalf("Holder = %v, %v", h, err)
	}
	if h.PID != holder.Process.Pid || h.Command != "barn-node apply" {
		t.Fatalf("holder record = %+v, want pid %d command %q", h, holder.Process.Pid, "barn-node apply")
	}
	// Non-waiting: conflict at once with the holder as detail.
	_, err = r.LockDeployment(context.Background(), "barn-state test", false, nil)
	wantClass(t, err, exitcode.Conflict, "barn-node apply")
	e := exitcode.As(err)
	if e.Reason != "deployment_busy" {
		t.Fatalf("reason = %q", e.Reason)
	}
	if d, ok := e.Detail.(LockHolder); !ok || d.PID != holder.Process.Pid {
		t.Fatalf("detail = %#v", e.Detail)
	}
	// (It did not wait: a waiting lock returns only once it holds the
	// lock, and the holder keeps it until it is killed below.)
	// Cancelled while waiting → cancelled.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = r.LockDeployment(ctx, "barn-state test", true, nil)
	if exitcode.ClassOf(err) != exitcode.Cancelled {
		t.Fatalf("cancelled wait = %v", err)
	}

	// SIGKILL the holder: the kernel frees the lock; its stale record is
	// not reported as a holder.
	if err := holder.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = holder.Wait()
	if h, err := r.Holder(LockDeploymentName); h != nil || err != nil {
		t.Fatalf("Holder after SIGKILL = %+v, %v", h, err)
	}
	l, err := r.LockDeployment(context.Background(), "barn-state test", false, nil)
	if err != nil {
		t.Fatalf("lock after the holder was killed: %v", err)
	}
	if h, _ := r.Holder(LockDeploymentName); h == nil || h.PID != os.Getpid() {
		t.Fatalf("new holder = %+v", h)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if h, _ := r.Holder(LockDeploymentName); h != nil {
		t.Fatalf("holder after Unlock = %+v", h)
	}
}

func TestWaitingCommandPrintsHolder(t *testing.T) {
	r := testRoot(t)
	holder := startHolder(t, r)

	// Times out: says who it waits for, then conflict deployment_busy.
	cmd := helperCmd(t, r, "wait", "HELPER_WAIT=300ms")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 4 {
		t.Fatalf("waiter exit = %v, want 4; output:\n%s", err, out)
	}
	want := fmt.Sprintf("waiting for barn-node apply (pid %d, since ", holder.Process.Pid)
	if !strings.Contains(string(out), want) {
		t.Fatalf("waiter output lacks %q:\n%s", want, out)
	}
	if !strings.Contains(string(out), "error: conflict deployment_busy") {
		t.Fatalf("waiter did not fail with deployment_busy:\n%s", out)
	}

	// Gets the lock once the holder dies: the holder is killed once the
	// waiter has said it waits (read from its output, not guessed by a
	// sleep); the output ends when the waiter exits.
	cmd = helperCmd(t, r, "wait", "HELPER_WAIT=20s")
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var buf strings.Builder
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		buf.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), want) {
			break
		}
	}
	_ = holder.Process.Kill()
	for sc.Scan() {
		buf.WriteString(sc.Text() + "\n")
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("waiter: %v\n%s", err, buf.String())
	}
	if !strings.Contains(buf.String(), want) || !strings.Contains(buf.String(), "acquired") {
		t.Fatalf("waiter output:\n%s", buf.String())
	}
}

func TestAtomicWriteSurvivesSIGKILL(t *testing.T) {
	r := testRoot(t)
	if err := r.WriteDeployment(&Deployment{Generation: 1, Spec: testSpec("pg-1")}); err != nil {
		t.Fatal(err)
	}
	iterations := 40
	if testing.Short() {
		iterations = 10
	}
	last := int64(1)
	for i := 0; i < iterations; i++ {
		cmd := helperCmd(t, r, "rewrite")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
			t.Fatalf("writer said %q, %v", line, err)
		}
		time.Sleep(time.Duration(rand.IntN(20000)) * time.Microsecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		d, err := r.ReadDeployment()
		if err != nil || d == nil {
			t.Fatalf("iteration %d: after SIGKILL the document is not readable: %v", i, err)
		}
		if d.Generation < last {
			t.Fatalf("iteration %d: generation went back from %d to %d", i, last, d.Generation)
		}
		last = d.Generation
	}
	// Each writer said ready only after committing a write of its own, so
	// a kill that lost a committed write shows here.
	if want := int64(1 + iterations); last < want {
		t.Fatalf("generation %d after %d writers that each committed a write, want at least %d", last, iterations, want)
	}
}
