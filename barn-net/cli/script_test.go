package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"barn.dev/lib/tool"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"barn-net": func() { os.Exit(Main(context.Background(), os.Args[1:], tool.OSStdio(), os.Getenv)) },
	})
}

// TestScripts runs the non-live suites in testdata/script: every path is
// redirected under $WORK (BARN_NET_ETC, BARN_NET_STATE, BARN_NET_RUN,
// BARN_NET_HELPER), nmcli/systemctl are shell fakes on PATH, and nothing
// is installed (install/uninstall run without --yes or are refused).
// Goldens: BARN_UPDATE=1.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		UpdateScripts:       os.Getenv("BARN_UPDATE") == "1",
		Cmds:                map[string]func(*testscript.TestScript, bool, []string){"exits": cmdExits},
		Condition: func(cond string) (bool, error) {
			if cond == "root" {
				return os.Geteuid() == 0, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Setup: func(env *testscript.Env) error {
			w := env.WorkDir
			env.Setenv("BARN_NET_ETC", w+"/etc")
			env.Setenv("BARN_NET_STATE", w+"/state")
			env.Setenv("BARN_NET_RUN", w+"/run")
			env.Setenv("BARN_NET_HELPER", w+"/qemu-bridge-helper")
			env.Setenv("BARN_BRIDGE", "barntest9")
			env.Setenv("PATH", w+"/bin:"+os.Getenv("PATH"))
			for _, d := range []string{"etc/systemd", "state", "run", "bin"} {
				if err := os.MkdirAll(w+"/"+d, 0o755); err != nil {
					return err
				}
			}
			return os.WriteFile(w+"/qemu-bridge-helper", []byte("#!/bin/sh\nexit 1\n"), 0o755)
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
