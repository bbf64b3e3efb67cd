package scripttest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"

	"barn.dev/lib/exitcode"
)

// envErrorLog names the file a tool run by a script appends its faulty
// errors to; the script fails at its end when the file is not empty.
const envErrorLog = "BARN_TEST_ERROR_LOG"

// checkError is the tool.ErrorHook of every tool a script runs: an error
// whose message repeats a clause (its cause printed twice), or whose reason
// the reason table (exitcode.Reasons) does not list, is recorded in
// $BARN_TEST_ERROR_LOG.
func checkError(e *exitcode.Error) {
	path := os.Getenv(envErrorLog)
	if path == "" {
		return
	}
	if c := e.RepeatedClause(); c != "" {
		appendLine(path, fmt.Sprintf("message repeats %q: %s", c, e.Message))
	}
	if _, ok := exitcode.LookupReason(e.Reason); e.Reason != "" && !ok {
		appendLine(path, fmt.Sprintf("reason %q is not in the reason table (lib/exitcode/reasons.go): %s", e.Reason, e.Message))
	}
}

func appendLine(path, line string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scripttest: recording a faulty error: %v\n", err)
		os.Exit(99)
	}
	defer f.Close()
	fmt.Fprintln(f, strings.ReplaceAll(line, "\n", `\n`))
}

// watchErrors points the tools of env's script at a fresh error log and
// fails the script at its end for every faulty error they recorded.
func watchErrors(env *testscript.Env) {
	path := filepath.Join(env.WorkDir, ".barn-test-errors")
	env.Setenv(envErrorLog, path)
	env.Defer(func() {
		b, err := os.ReadFile(path)
		if err == nil && len(b) > 0 {
			env.T().Fatal("tools reported faulty errors:\n" + string(b))
		}
	})
}
