// Package scripttest is what every Barn testscript suite shares: running a
// tool in process the way its main.go does, the `exits` command, and the
// common testscript.Params (explicit exec, unique names, golden updates
// with BARN_UPDATE=1, BARN_HOME inside the script's work directory, and
// BARN_TERMINAL_PROMPT=0 so no tool asks the developer's terminal).
package scripttest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"barn.dev/lib/tool"
)

// MainFunc is the signature of every tool's cli.Main.
type MainFunc func(ctx context.Context, args []string, stdio tool.Stdio, getenv func(string) string) int

// Command adapts a tool's cli.Main into a testscript command: as main.go
// does, SIGINT and SIGTERM cancel the context (so a script can interrupt a
// command and see exit 130). Every error the tool reports is checked (see
// watchErrors): a message that repeats its cause fails the script.
func Command(main MainFunc) func() {
	return func() {
		tool.ErrorHook = checkError
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := main(ctx, os.Args[1:], tool.OSStdio(), os.Getenv)
		stop()
		os.Exit(code)
	}
}

// Exits implements `exits CODE PROG [ARGS...]`: PROG must exit with exactly
// CODE. Its stdout and stderr stay available to the following stdout and
// stderr checks.
func Exits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits CODE PROG [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits: bad code %q", args[0])
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		got = ee.ExitCode()
	} else if err != nil {
		ts.Fatalf("exits: %v", err)
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}

// Params returns the shared settings for the scripts in dir. Callers add
// their own commands to Cmds and may wrap Setup (call the returned one
// first).
func Params(dir string) testscript.Params {
	return testscript.Params{
		Dir:                 dir,
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		UpdateScripts:       os.Getenv("BARN_UPDATE") == "1",
		Cmds:                map[string]func(*testscript.TestScript, bool, []string){"exits": Exits, "tabcomplete": TabComplete, "withtty": WithTTY, "waitfor": WaitFor},
		Setup: func(env *testscript.Env) error {
			env.Setenv("BARN_HOME", env.WorkDir+"/.barn")
			env.Setenv(tool.EnvTerminalPrompt, "0")
			watchErrors(env)
			return nil
		},
	}
}

// Configure fills the shared settings into p: explicit exec, unique script
// names, golden updates with BARN_UPDATE=1, and the exits, tabcomplete,
// withtty and waitfor commands (added to p.Cmds unless p defines their own).
func Configure(p testscript.Params) testscript.Params {
	p.RequireExplicitExec = true
	p.RequireUniqueNames = true
	p.UpdateScripts = os.Getenv("BARN_UPDATE") == "1"
	if p.Cmds == nil {
		p.Cmds = map[string]func(*testscript.TestScript, bool, []string){}
	}
	if _, ok := p.Cmds["exits"]; !ok {
		p.Cmds["exits"] = Exits
	}
	if _, ok := p.Cmds["tabcomplete"]; !ok {
		p.Cmds["tabcomplete"] = TabComplete
	}
	if _, ok := p.Cmds["withtty"]; !ok {
		p.Cmds["withtty"] = WithTTY
	}
	if _, ok := p.Cmds["waitfor"]; !ok {
		p.Cmds["waitfor"] = WaitFor
	}
	setup := p.Setup
	p.Setup = func(env *testscript.Env) error {
		// Never ask the terminal of whoever runs the tests.
		env.Setenv(tool.EnvTerminalPrompt, "0")
		watchErrors(env)
		if setup != nil {
			return setup(env)
		}
		return nil
	}
	return p
}

// Run runs the scripts of p as testscript.Run does, with their work
// directories under t.TempDir() unless p names a root: testscript removes
// its own root only after every script of the directory ran, so a -run
// that selects some scripts left an empty go-test-script* in /tmp each
// time; t.TempDir() goes once t and its parallel scripts are done.
func Run(t *testing.T, p testscript.Params) {
	if p.WorkdirRoot == "" {
		p.WorkdirRoot = t.TempDir()
	}
	testscript.Run(t, p)
}
