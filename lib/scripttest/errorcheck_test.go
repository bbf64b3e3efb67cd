package scripttest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
)

// TestCheckErrorRecordsFaultyErrors is the hook's contract: a reason the
// table lacks and a repeated clause are recorded; a listed reason, no
// reason and a clean message are not.
func TestCheckErrorRecordsFaultyErrors(t *testing.T) {
	log := filepath.Join(t.TempDir(), "errors")
	t.Setenv(envErrorLog, log)
	checkError(exitcode.New(exitcode.Conflict, "the deployment is busy").WithReason("deployment_busy"))
	checkError(exitcode.New(exitcode.Runtime, "no reason given"))
	if _, err := os.Stat(log); !os.IsNotExist(err) {
		t.Fatalf("a sound error was recorded (stat: %v)", err)
	}
	checkError(exitcode.New(exitcode.Usage, "made up").WithReason("made_up_reason"))
	checkError(exitcode.New(exitcode.Runtime, "read k: open k: gone: open k: gone"))
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `reason "made_up_reason" is not in the reason table`) ||
		!strings.Contains(lines[1], `message repeats "open k: gone"`) {
		t.Fatalf("recorded:\n%s", b)
	}
}
