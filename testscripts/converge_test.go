package testscripts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/tool"
)

// maxHintSteps bounds a convergence: no fixture needs more hints.
const maxHintSteps = 8

// nextLine is a `next:` line on stderr, or a status node's "next (n): ..."
// line.
var nextLine = regexp.MustCompile(`(?m)^next(?: \([^)]*\))?: (.+)$`)

// cmdConverge: `converge [-repair FILE=SOURCE]... INVENTORY` follows
// Barn's own next: hints from the state the script left until the lab
// converges, and prints each hint it followed (one "next: ..." line per
// step, so the script can assert the chain). Each step:
//
//  1. run `barn-node status`; its next: hints (stderr and each node's
//     "next") are the candidates;
//  2. when status exits 0 with none, plan the inventory (`barn-inventory
//     resolve -f INVENTORY | barn-plan`): action none and a clean
//     `barn-state verify` is converged; action none and a failing verify
//     makes verify's next: hints the candidates; otherwise the plan's
//     next commands are the candidates;
//  3. execute the first candidate as printed, with sh, in $WORK.
//
// It fails when a hint is printed again after it was followed (it leads
// back to itself), when a hint fails as a usage error (it does not work
// as printed in that state), when status fails without a hint, when a
// hint is a manual step no -repair names (a manual step is allowed only
// where evidence is damaged, and the repair is the fixture's: copying
// SOURCE over FILE, both relative to $WORK, once the hint names FILE; an
// empty SOURCE moves FILE out, to $WORK/<its name>.aside),
// and after maxHintSteps steps.
func cmdConverge(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("usage: converge [-repair FILE=SOURCE]... INVENTORY")
	}
	repairs := map[string]string{}
	for len(args) > 1 && args[0] == "-repair" {
		file, src, ok := strings.Cut(args[1], "=")
		if !ok {
			ts.Fatalf("converge: -repair wants FILE=SOURCE, got %q", args[1])
		}
		repairs[file] = src
		args = args[2:]
	}
	if len(args) != 1 {
		ts.Fatalf("usage: converge [-repair FILE=SOURCE]... INVENTORY")
	}
	pipeline := "barn-inventory resolve -f " + args[0] + " | barn-plan"
	followed := map[string]bool{}
	for step := 0; step < maxHintSteps; step++ {
		code, stdout, stderr := shell(ts, "barn-node status")
		hints := statusHints(stdout, stderr)
		if len(hints) == 0 && code != 0 {
			ts.Fatalf("barn-node status exits %d with no next: hint:\n%s", code, stderr)
		}
		if len(hints) == 0 {
			code, stdout, stderr = shell(ts, pipeline)
			var p struct {
				Action string   `json:"action"`
				Next   []string `json:"next"`
			}
			if code != 0 || json.Unmarshal([]byte(stdout), &p) != nil {
				ts.Fatalf("%s exits %d:\n%s", pipeline, code, stderr)
			}
			if p.Action == "none" {
				code, _, stderr := shell(ts, "barn-state verify")
				if code == 0 {
					fmt.Fprintf(ts.Stdout(), "converged after %d step(s)\n", step)
					return
				}
				for _, m := range nextLine.FindAllStringSubmatch(stderr, -1) {
					hints = append(hints, strings.TrimSpace(m[1]))
				}
				if len(hints) == 0 {
					ts.Fatalf("status and plan are settled but barn-state verify exits %d with no next: hint:\n%s", code, stderr)
				}
			} else if hints = p.Next; len(hints) == 0 {
				ts.Fatalf("the plan says %s with no next command", p.Action)
			}
		}
		h := hints[0]
		fmt.Fprintf(ts.Stdout(), "next: %s\n", h)
		if followed[h] {
			ts.Fatalf("the hint %q was followed already and is printed again: it leads back to itself", h)
		}
		followed[h] = true
		if !isCommand(h) {
			if !repair(ts, h, repairs) {
				ts.Fatalf("the hint %q is a manual step and no -repair of this fixture answers it", h)
			}
			continue
		}
		code, _, stderr = shell(ts, h)
		if code != 0 {
			fmt.Fprintf(ts.Stdout(), "  exit %d: %s\n", code, lastLine(stderr))
		}
		if exitcode.Usage.Code() == code {
			ts.Fatalf("the hint %q does not work as printed (usage error):\n%s", h, stderr)
		}
	}
	ts.Fatalf("no convergence after %d hints", maxHintSteps)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// statusHints collects the next: hints of a barn-node status run: stderr's
// next: lines, then each node's "next" in the JSON document, deduplicated
// in order.
func statusHints(stdout, stderr string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(h string) {
		if h = strings.TrimSpace(h); h != "" && !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	for _, m := range nextLine.FindAllStringSubmatch(stderr, -1) {
		add(m[1])
	}
	var doc struct {
		Next  string `json:"next"`
		Nodes []struct {
			Next string `json:"next"`
		} `json:"nodes"`
	}
	if json.Unmarshal([]byte(stdout), &doc) == nil {
		add(doc.Next)
		for _, n := range doc.Nodes {
			add(n.Next)
		}
	}
	return out
}

// isCommand reports whether hint is a command line (it starts with one of
// Barn's tools) rather than a manual step.
func isCommand(hint string) bool {
	first, _, _ := strings.Cut(hint, " ")
	_, ok := Tools[first]
	// a move that never overwrites (mv -n) is the one manual step a hint
	// may spell out as a command, and is run as printed
	return ok || strings.HasPrefix(hint, "mv -n ")
}

// repair performs the fixture's repair for the file a manual hint names,
// once; it reports whether one applied.
func repair(ts *testscript.TestScript, hint string, repairs map[string]string) bool {
	for file, src := range repairs {
		if strings.Contains(hint, file) {
			if src == "" {
				ts.Check(os.Rename(ts.MkAbs(file), ts.MkAbs(filepath.Base(file)+".aside")))
			} else {
				data, err := os.ReadFile(ts.MkAbs(src))
				ts.Check(err)
				ts.Check(os.WriteFile(ts.MkAbs(file), data, 0o600))
			}
			delete(repairs, file)
			fmt.Fprintf(ts.Stdout(), "repaired: %s\n", file)
			return true
		}
	}
	return false
}

// shell runs line with sh -c in $WORK with the script's environment (the
// registered tools are on its PATH) and returns the exit status, stdout
// and stderr.
func shell(ts *testscript.TestScript, line string) (int, string, string) {
	cmd := exec.Command("sh", "-c", line)
	cmd.Dir = ts.Getenv("WORK")
	cmd.Env = scriptEnv(ts)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errb.String()
	case err != nil:
		ts.Fatalf("sh -c %q: %v", line, err)
	}
	return 0, out.String(), errb.String()
}

// scriptEnv is the script's environment as a list; a variable the
// script left empty is unset, as in a user's shell (a flag's variable
// such as BARN_HOTPLUG reads "" as a value, and refuses it).
func scriptEnv(ts *testscript.TestScript) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "WORK", "BARN_HOME", "BARN_RUNTIME_DIR", "BARN_QEMU", "BARN_ACCEL",
		"BARN_PRIVATE_NET", "BARN_READINESS", "BARN_STOP_TIMEOUT", "BARN_REPO", tool.EnvTerminalPrompt, "BARN_CRASH_AFTER", "BARN_HOTPLUG"} {
		if v := ts.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}
