package scripttest

import (
	"os"
	"strings"
	"syscall"
)

// CrashAfterEnv names the crash-injection variable of test binaries.
const CrashAfterEnv = "BARN_CRASH_AFTER"

// CrashAfter is crash injection for test binaries (barn-node's
// cli.CrashHook): BARN_CRASH_AFTER="<step>" or "<step>:<node>" makes the
// process SIGKILL itself right after that durable lifecycle step (the
// steps lifecycle.Manager reports to its Hook), optionally for one node
// only. It returns nil when the variable is unset. The shipped binaries
// never link this package.
func CrashAfter(getenv func(string) string) func(step, node string) {
	spec := getenv(CrashAfterEnv)
	if spec == "" {
		return nil
	}
	step, node, _ := strings.Cut(spec, ":")
	return func(s, n string) {
		if s == step && (node == "" || node == n) {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // never continue past the crash point
		}
	}
}
