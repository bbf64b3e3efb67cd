// Package testscripts holds Barn's end-to-end suites: txtar scripts that
// run the real tools, in process, the way users pipe them.
//
// Golden files inside scripts are regenerated with BARN_UPDATE=1.
package testscripts

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	inventory "barn.dev/barn-inventory/cli"
	net "barn.dev/barn-net/cli"
	node "barn.dev/barn-node/cli"
	plan "barn.dev/barn-plan/cli"
	repo "barn.dev/barn-repo/cli"
	state "barn.dev/barn-state/cli"
	"barn.dev/lib/tool"
)

func run(main func(context.Context, []string, tool.Stdio, func(string) string) int) func() {
	return func() { os.Exit(main(context.Background(), os.Args[1:], tool.OSStdio(), os.Getenv)) }
}

// Tools maps every Barn tool's name to its in-process entry point.
var Tools = map[string]func(){
	"barn-inventory": run(inventory.Main),
	"barn-plan":      run(plan.Main),
	"barn-node":      run(node.Main),
	"barn-net":       run(net.Main),
	"barn-repo":      run(repo.Main),
	"barn-state":     run(state.Main),
}

func TestMain(m *testing.M) {
	testscript.Main(m, Tools)
}

func params(dir string) testscript.Params {
	return testscript.Params{
		Dir:                 dir,
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		UpdateScripts:       os.Getenv("BARN_UPDATE") == "1",
		Cmds:                map[string]func(*testscript.TestScript, bool, []string){"exits": cmdExits},
		Setup: func(env *testscript.Env) error {
			env.Setenv("BARN_HOME", env.WorkDir+"/.barn")
			return nil
		},
	}
}

// TestPipeline runs the multi-tool pipeline scripts.
func TestPipeline(t *testing.T) {
	testscript.Run(t, params("testdata/script"))
}

// cmdExits runs `exits CODE PROG ARGS...`: PROG must exit with exactly CODE.
// Its stdout and stderr are kept for the following stdout/stderr checks.
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
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
