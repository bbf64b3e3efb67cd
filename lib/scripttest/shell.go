package scripttest

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/creack/pty"
	"github.com/rogpeppe/go-internal/testscript"

	"barn.dev/lib/tool"
)

// TabComplete implements `tabcomplete SHELL TOOL LINE`: it loads TOOL's
// completion (`TOOL completion SHELL`) into a real shell and completes LINE
// the way a person pressing Tab does, then prints what the shell did:
//
//	bash, zsh  an interactive shell on a pseudo-terminal is sent LINE and a
//	           Tab; "line: <the edited line>" is printed, then every
//	           candidate the shell listed, one per line, sorted
//	fish       fish's own completion engine (complete -C LINE); every
//	           candidate, one per line, sorted
//
// It fails the script when the shell is not installed.
func TabComplete(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: tabcomplete bash|zsh|fish TOOL LINE")
	}
	shell, tool, line := args[0], args[1], args[2]
	if _, err := exec.LookPath(shell); err != nil {
		ts.Fatalf("tabcomplete: %s is not installed (scripts/install-deps.sh installs it)", shell)
	}
	var out string
	var err error
	switch shell {
	case "fish":
		out, err = completeFish(ts, tool, line)
	case "bash", "zsh":
		out, err = completeInteractive(ts, shell, tool, line)
	default:
		ts.Fatalf("tabcomplete: unknown shell %q", shell)
	}
	if err != nil {
		ts.Fatalf("tabcomplete %s: %v", shell, err)
	}
	fmt.Fprint(ts.Stdout(), out)
}

func shellEnv(ts *testscript.TestScript) []string {
	env := []string{"TERM=dumb", "HOME=" + ts.Getenv("HOME"), "PATH=" + ts.Getenv("PATH")}
	for _, k := range []string{"BARN_HOME", "BARN_REPO", "XDG_RUNTIME_DIR", tool.EnvTerminalPrompt} {
		if v := ts.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

func completeFish(ts *testscript.TestScript, tool, line string) (string, error) {
	script := fmt.Sprintf("%s completion fish | source; complete -C %s", tool, fishQuote(line))
	cmd := exec.Command("fish", "--no-config", "-c", script)
	cmd.Dir = ts.Getenv("WORK")
	cmd.Env = shellEnv(ts)
	b, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%v: %s", err, b)
	}
	var cands []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f, _, _ := strings.Cut(l, "\t"); f != "" {
			cands = append(cands, f)
		}
	}
	sort.Strings(cands)
	return strings.Join(cands, "\n") + "\n", nil
}

func fishQuote(s string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", `\'`) + "'"
}

// The marker a key binding prints with the edited line after the Tab.
var lineMarker = regexp.MustCompile(`<<LINE:(.*)>>`)

var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[a-zA-Z]|\x1b[=>]|\x07`)

func completeInteractive(ts *testscript.TestScript, shell, tool, line string) (string, error) {
	var cmd *exec.Cmd
	var setup []string
	switch shell {
	case "bash":
		cmd = exec.Command("bash", "--norc", "--noprofile", "-i")
		setup = []string{
			`PS1='$ '; PS2='> '`,
			`bind 'set completion-display-width 0'; bind 'set show-all-if-ambiguous on'; bind 'set completion-query-items 0'; bind 'set page-completions off'; bind 'set bell-style none'`,
			fmt.Sprintf(`source <(%s completion bash)`, tool),
			`bind -x '"\C-x\C-p": printf "\n<<LINE:%s>>\n" "$READLINE_LINE"'`,
		}
	case "zsh":
		cmd = exec.Command("zsh", "-f", "-i")
		setup = []string{
			`PS1='$ '; unsetopt beep; setopt nolistbeep`,
			`autoload -U compinit && compinit -u -D`,
			fmt.Sprintf(`source <(%s completion zsh)`, tool),
			`print-line() { print -r -- $'\n'"<<LINE:$BUFFER>>" >/dev/tty }; zle -N print-line; bindkey '^X^P' print-line`,
		}
	}
	cmd.Dir = ts.Getenv("WORK")
	cmd.Env = shellEnv(ts)
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 200, Cols: 400})
	if err != nil {
		return "", err
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		f.Close()
	}()
	r := &ptyReader{f: f}
	go r.pump()
	for _, s := range setup {
		if _, err := io.WriteString(f, s+"\n"); err != nil {
			return "", err
		}
	}
	// A sentinel proves the setup ran before the line is typed.
	if _, err := io.WriteString(f, "echo READY-$((6*7))\n"); err != nil {
		return "", err
	}
	if _, err := r.waitFor("READY-42", 20*time.Second); err != nil {
		return "", fmt.Errorf("shell did not start: %v", err)
	}
	start := r.mark()
	if _, err := io.WriteString(f, line+"\t"); err != nil {
		return "", err
	}
	// The shell reads keys in order: the binding runs after the Tab's
	// completion has listed or inserted.
	if _, err := io.WriteString(f, "\x18\x10"); err != nil {
		return "", err
	}
	text, err := r.waitForRegexp(start, lineMarker, 20*time.Second)
	if err != nil {
		return "", err
	}
	m := lineMarker.FindStringSubmatchIndex(text)
	edited := text[m[2]:m[3]]
	listing := text[:m[0]]
	seen := map[string]bool{}
	var cands []string
	lines := strings.Split(listing, "\n")
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if i == 0 || l == "" || strings.HasPrefix(l, "$ ") || strings.Contains(l, line) {
			continue // the typed line, its redraws, blank lines
		}
		for _, w := range strings.Fields(l) {
			if !seen[w] {
				seen[w] = true
				cands = append(cands, w)
			}
		}
	}
	sort.Strings(cands)
	var b bytes.Buffer
	fmt.Fprintf(&b, "line: %s\n", edited)
	for _, c := range cands {
		fmt.Fprintln(&b, c)
	}
	return b.String(), nil
}

// ptyReader collects a pseudo-terminal's output, without escapes and
// carriage returns.
type ptyReader struct {
	f   *os.File
	mu  sync.Mutex
	buf bytes.Buffer
}

func (r *ptyReader) pump() {
	b := make([]byte, 4096)
	for {
		n, err := r.f.Read(b)
		if n > 0 {
			r.append(b[:n])
		}
		if err != nil {
			return
		}
	}
}

func (r *ptyReader) append(b []byte) {
	r.mu.Lock()
	r.buf.Write(b)
	r.mu.Unlock()
}

func (r *ptyReader) text() string {
	r.mu.Lock()
	s := r.buf.String()
	r.mu.Unlock()
	s = ansi.ReplaceAllString(s, "")
	return strings.ReplaceAll(s, "\r", "")
}

func (r *ptyReader) mark() int { return len(r.text()) }

func (r *ptyReader) waitFor(s string, d time.Duration) (string, error) {
	return r.waitForRegexp(0, regexp.MustCompile(regexp.QuoteMeta(s)), d)
}

func (r *ptyReader) waitForRegexp(from int, re *regexp.Regexp, d time.Duration) (string, error) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		t := r.text()
		if from <= len(t) && re.MatchString(t[from:]) {
			return t[from:], nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "", fmt.Errorf("timed out after %s waiting for %s; the terminal showed:\n%s", d, re, r.text())
}
