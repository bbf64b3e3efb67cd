package tool

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"barn.dev/lib/testexec"
)

// TestCompletionScriptRunsToolAtOddPath: the registration code bash, zsh
// and fish evaluate runs the tool itself when its path has spaces, quotes
// and other shell characters (bash and zsh parse `complete -C`'s command
// line again at every Tab, so it is quoted twice).
func TestCompletionScriptRunsToolAtOddPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), `my tools $HOME 'q' "d" ;&`)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "barn-x")
	if err := testexec.WriteScript(bin, []byte("#!/bin/sh\necho \"ran:$COMP_LINE\"\n")); err != nil {
		t.Fatal(err)
	}
	// bash: register, then run the stored -C command line as bash does.
	script := completionScript("bash", bin, "barn-x") +
		`eval "w=( $(complete -p barn-x) )"; COMP_LINE='barn-x ' eval "${w[2]}"`
	out, err := exec.Command("bash", "--norc", "--noprofile", "-c", script).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ran:barn-x" {
		t.Errorf("bash: %v: %q\n%s", err, out, script)
	}
	if _, err := exec.LookPath("zsh"); err == nil {
		// zsh: bashcompinit stores "_bash_complete -C CMD" in $_comps, and
		// its compgen runs $(eval CMD).
		script := "autoload -U compinit && compinit -u -D\n" + completionScript("zsh", bin, "barn-x") +
			`eval "set -- ${_comps[barn-x]}"; export COMP_LINE='barn-x '; eval $3`
		out, err := exec.Command("zsh", "-f", "-c", script).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "ran:barn-x" {
			t.Errorf("zsh: %v: %q\n%s", err, out, script)
		}
	}
	if _, err := exec.LookPath("fish"); err == nil {
		// the function body runs the tool (commandline itself only
		// complains on stderr outside an interactive prompt)
		script := completionScript("fish", bin, "barn-x") + "; __complete_barn-x"
		out, err := exec.Command("fish", "--no-config", "-c", script).Output()
		if err != nil || !strings.HasPrefix(strings.TrimSpace(string(out)), "ran:") {
			t.Errorf("fish: %v: %q\n%s", err, out, script)
		}
	}
}
