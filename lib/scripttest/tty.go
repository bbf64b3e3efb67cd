package scripttest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"github.com/rogpeppe/go-internal/testscript"
)

// WithTTY implements `withtty CODE ANSWER STDIN PROG [ARGS...]`: PROG runs
// in a new session whose controlling terminal is a fresh pseudo-terminal,
// with its stdin read from the file STDIN (so stdin is taken, not a
// terminal; STDIN "tty" makes stdin the terminal itself, as for a command
// a person types with nothing piped in) and BARN_TERMINAL_PROMPT unset. When the terminal shows a
// question ("Type" or "[y/N]"/"[Y/n]"), ANSWER and a newline are typed on
// it; ANSWER "-" types ^D (end of input) instead. PROG must exit
// with CODE. Its stdout and stderr stay available to the following checks;
// what the terminal showed is appended to stderr after a "--- tty ---" line.
func WithTTY(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 4 {
		ts.Fatalf("usage: withtty CODE ANSWER STDIN PROG [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("withtty: bad code %q", args[0])
	}
	answer, stdinPath, prog := args[1], ts.MkAbs(args[2]), args[3]
	ptm, pts, err := pty.Open()
	if err != nil {
		ts.Fatalf("withtty: %v", err)
	}
	defer ptm.Close()
	in := pts
	if args[2] != "tty" {
		if in, err = os.Open(stdinPath); err != nil {
			ts.Fatalf("withtty: %v", err)
		}
		defer in.Close()
	}
	path, err := exec.LookPath(prog)
	if err != nil {
		ts.Fatalf("withtty: %v", err)
	}
	cmd := exec.Command(path, args[4:]...)
	cmd.Dir = ts.Getenv("WORK")
	cmd.Env = ttyEnv(ts)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = in, &stdout, &stderr
	cmd.ExtraFiles = []*os.File{pts}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 3}
	if err := cmd.Start(); err != nil {
		ts.Fatalf("withtty: %v", err)
	}
	pts.Close()
	var mu sync.Mutex
	var screen bytes.Buffer
	go func() {
		buf := make([]byte, 1024)
		answered := false
		for {
			n, err := ptm.Read(buf)
			mu.Lock()
			screen.Write(buf[:n])
			s := screen.String()
			mu.Unlock()
			if !answered && (strings.Contains(s, "Type ") || strings.Contains(s, "[y/N]") || strings.Contains(s, "[Y/n]")) {
				answered = true
				if answer == "-" {
					_, _ = io.WriteString(ptm, "\x04") // ^D: end of input
				} else {
					_, _ = io.WriteString(ptm, answer+"\n")
				}
			}
			if err != nil {
				return
			}
		}
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		err = <-done
		ts.Logf("withtty: %s timed out", prog)
	}
	got := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		got = ee.ExitCode()
	} else if err != nil {
		ts.Fatalf("withtty: %v", err)
	}
	mu.Lock()
	fmt.Fprint(ts.Stdout(), stdout.String())
	fmt.Fprintf(ts.Stderr(), "%s--- tty ---\n%s", stderr.String(), strings.ReplaceAll(screen.String(), "\r", ""))
	mu.Unlock()
	if got != want {
		ts.Fatalf("%s exited %d, want %d", prog, got, want)
	}
}

// ttyKeys are the script variables a command under withtty sees.
var ttyKeys = []string{"PATH", "HOME", "WORK", "TMPDIR", "BARN_HOME", "BARN_RUNTIME_DIR", "BARN_QEMU", "BARN_ACCEL",
	"BARN_PRIVATE_NET", "BARN_READINESS", "BARN_STOP_TIMEOUT", "BARN_SSH_PORT_BASE", "BARN_REPO", "BARN_NET_ETC", "BARN_NET_STATE",
	"BARN_NET_RUN", "BARN_NET_HELPER", "BARN_BRIDGE"}

// ttyEnv is the script's environment for ttyKeys; BARN_TERMINAL_PROMPT is
// left out so the terminal may be asked.
func ttyEnv(ts *testscript.TestScript) []string {
	var env []string
	for _, k := range ttyKeys {
		if v := ts.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}
