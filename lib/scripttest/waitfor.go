package scripttest

import (
	"os"
	"regexp"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// WaitForLimit bounds a waitfor: the condition, not this limit, ends a
// passing wait; the limit only ends one that would never pass.
const WaitForLimit = 2 * time.Minute

// WaitFor is the `waitfor FILE REGEXP` command: a synchronisation point
// that waits until FILE (relative to $WORK) exists and its content
// matches REGEXP, e.g. until a background command has printed that it is
// following before the script changes what it follows. It fails after
// WaitForLimit naming the file's last content. `! waitfor` is refused: a
// wait for something not to happen would be a sleep.
func WaitFor(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitfor FILE REGEXP")
	}
	re, err := regexp.Compile(args[1])
	ts.Check(err)
	path := ts.MkAbs(args[0])
	deadline := time.Now().Add(WaitForLimit)
	for {
		b, err := os.ReadFile(path)
		if err == nil && re.Match(b) {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waitfor: %s did not match %q within %s (read: %v)\n%s", args[0], args[1], WaitForLimit, err, b)
		}
		time.Sleep(20 * time.Millisecond) // poll interval of a bounded condition wait
	}
}
