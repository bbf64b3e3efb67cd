package cli_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"barn.dev/barn-inventory/cli"
	"barn.dev/lib/tool"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"barn-inventory": func() {
			os.Exit(cli.Main(context.Background(), os.Args[1:], tool.OSStdio(), os.Getenv))
		},
	})
}

// TestScripts runs testdata/script/*.txtar; BARN_UPDATE=1 rewrites the
// golden sections.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		UpdateScripts:       os.Getenv("BARN_UPDATE") == "1",
		Cmds:                map[string]func(*testscript.TestScript, bool, []string){"exits": cmdExits},
		Setup: func(env *testscript.Env) error {
			env.Setenv("BARN_HOME", env.WorkDir+"/.barn")
			return nil
		},
	})
}

// cmdExits runs `exits CODE PROG ARGS...`: PROG must exit with exactly CODE.
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
