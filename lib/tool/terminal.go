package tool

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"barn.dev/lib/exitcode"
)

// EnvTerminalPrompt disables prompting on the controlling terminal when it
// is "0" (as GIT_TERMINAL_PROMPT does for git): a command whose stdin is
// not a terminal then behaves as if there were no terminal at all. Test
// suites set it so that a developer's terminal is never asked.
const EnvTerminalPrompt = "BARN_TERMINAL_PROMPT"

// OpenTTY opens the process's controlling terminal (/dev/tty) for a prompt,
// the way ssh and git ask for a password when stdin is taken. It fails with
// ENXIO when the process has no controlling terminal (cron, CI, setsid).
func OpenTTY() (io.ReadWriteCloser, error) {
	return os.OpenFile("/dev/tty", os.O_RDWR, 0)
}

// prompter is where a question goes and its answer comes from.
type prompter struct {
	r     *bufio.Reader
	w     io.Writer
	close func()
}

// prompter returns stdin/stderr when stdin is a terminal; otherwise the
// controlling terminal (unless BARN_TERMINAL_PROMPT=0 or there is none);
// otherwise nil: no person can be asked.
func (e *Env) prompter(stdinTaken bool) *prompter {
	if e.InIsTerminal && !stdinTaken {
		return &prompter{r: bufio.NewReader(e.In), w: e.Err, close: func() {}}
	}
	if e.OpenTTY == nil || e.Getenv(EnvTerminalPrompt) == "0" {
		return nil
	}
	tty, err := e.OpenTTY()
	if err != nil {
		return nil
	}
	return &prompter{r: bufio.NewReader(tty), w: tty, close: func() { _ = tty.Close() }}
}

// Ask prints question on the terminal and returns the trimmed answer line.
// ok is false when no person can be asked (no terminal on stdin and no
// controlling terminal, or BARN_TERMINAL_PROMPT=0). stdinTaken says that
// stdin carries data (a plan), so only the controlling terminal may be
// asked. An empty answer at EOF is returned as "" with ok true.
func (e *Env) Ask(stdinTaken bool, question string) (answer string, ok bool) {
	p := e.prompter(stdinTaken)
	if p == nil {
		return "", false
	}
	defer p.close()
	fmt.Fprint(p.w, question)
	line, _ := p.r.ReadString('\n')
	return strings.TrimSpace(line), true
}

// Confirm implements type-to-confirm for destructive commands. With force it
// returns nil at once. Otherwise it asks on stdin when stdin is a terminal,
// else on the controlling terminal (/dev/tty) — always there when
// stdinTaken — printing prompt and requiring word to be typed exactly;
// anything else (an empty line, EOF, another word) is cancelled (130) and
// the caller must change nothing. With no terminal to ask it is a usage
// error (reason confirmation_required) that asks for --force.
func (e *Env) Confirm(force, stdinTaken bool, word, prompt string) error {
	if force {
		return nil
	}
	answer, ok := e.Ask(stdinTaken, fmt.Sprintf("%s\nType %q to continue: ", prompt, word))
	if !ok {
		return exitcode.New(exitcode.Usage, "confirmation needs a terminal; pass --force to %s without one", word).
			WithReason("confirmation_required")
	}
	if answer == "" {
		return exitcode.New(exitcode.Cancelled, "no confirmation given; nothing changed").WithReason("declined")
	}
	if answer != word {
		return exitcode.New(exitcode.Cancelled, "typed %q, not %q; nothing changed", answer, word).WithReason("declined")
	}
	return nil
}
