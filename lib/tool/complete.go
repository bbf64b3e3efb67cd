package tool

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/alecthomas/kong"
	"github.com/posener/complete"
	"github.com/willabides/kongplete"

	"barn.dev/lib/quote"
	"barn.dev/lib/spec"
)

// Shell completion is derived from the kong grammar by kongplete (which
// speaks posener/complete's protocol: the shell runs the tool itself with
// COMP_LINE and COMP_POINT set, and the tool prints one candidate per
// line). Commands, their aliases, flags and closed flag values (enum tags)
// come from the grammar; open values come from predictors named in a
// `predictor:"NAME"` tag:
//
//	yaml       YAML files (*.yml, *.yaml) and directories, for -f/--file
//	file       any file; qcow2: *.qcow2 and *.img; pub: *.pub (built in)
//	arch       the spellings of an architecture (spec.ArchSpellings; built in)
//	others     supplied by the grammar through Completer, e.g. node names
//	           from the applied state, image selectors from the active catalog
//
// A predictor reads the real world at completion time and must be quick
// and silent: on any error it returns no candidates.

// Completer is implemented by a grammar whose values need the real world
// to complete (node names, image selectors).
type Completer interface {
	Predictors(env *Env) map[string]Predictor
}

// Predictor returns the candidate words for a value; the caller keeps those
// that start with what was typed.
type Predictor func() []string

// completing reports whether the shell asked for completions.
func completing(getenv func(string) string) bool {
	return getenv("COMP_LINE") != ""
}

// runCompletion prints the candidates for COMP_LINE/COMP_POINT and exits.
func runCompletion(env *Env, parser *kong.Kong, grammar any, args []string) int {
	predictors := map[string]complete.Predictor{
		"yaml":  complete.PredictOr(complete.PredictFiles("*.yml"), complete.PredictFiles("*.yaml")),
		"file":  complete.PredictFiles("*"),
		"qcow2": complete.PredictOr(complete.PredictFiles("*.qcow2"), complete.PredictFiles("*.img")),
		"pub":   complete.PredictFiles("*.pub"),
		"arch":  complete.PredictSet(spec.ArchSpellings...),
	}
	if c, ok := grammar.(Completer); ok {
		for name, p := range c.Predictors(env) {
			predictors[name] = complete.PredictFunc(func(complete.Args) []string { return p() })
		}
	}
	cmd, err := kongplete.Command(parser, kongplete.WithPredictors(predictors))
	if err != nil {
		fmt.Fprintf(env.Err, "%s: completion: %v\n", env.Tool, err)
		return 1
	}
	addAliases(parser.Model.Node, &cmd)
	addDefaultCommand(parser.Model.Node, &cmd)
	c := complete.New(env.Tool, cmd)
	var out strings.Builder
	c.Out = &out
	c.Complete()
	words := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(args) >= 2 { // bash -C passes: command name, current word, previous word
		words = trimWordbreak(words, args[1], env.Getenv("COMP_LINE"))
	}
	for _, w := range words {
		if w != "" && w != "./" { // posener's file predictor offers the directory itself
			fmt.Fprintln(env.Out, w)
		}
	}
	return 0
}

// trimWordbreak adapts candidates to bash's word splitting: bash (and zsh's
// bashcompinit) split the word being completed at ':' (COMP_WORDBREAKS)
// and pass the command only the part after it as its first argument, then
// replace only that part. A candidate "d12:stable" for the typed "d12:s"
// must therefore come back as "stable". fish passes no arguments and keeps
// whole words.
func trimWordbreak(words []string, current, line string) []string {
	fields := strings.Fields(line)
	if len(fields) == 0 || strings.HasSuffix(line, " ") {
		return words
	}
	typed := fields[len(fields)-1]
	if !strings.HasSuffix(typed, current) || len(typed) == len(current) {
		return words
	}
	cut := len(typed) - len(current)
	out := make([]string, 0, len(words))
	for _, w := range words {
		if len(w) >= cut {
			out = append(out, w[cut:])
		}
	}
	return out
}

// addAliases makes every command alias complete like the command itself
// (kongplete knows only canonical names).
func addAliases(n *kong.Node, cmd *complete.Command) {
	for _, child := range n.Children {
		sub, ok := cmd.Sub[child.Name]
		if !ok {
			continue
		}
		addAliases(child, &sub)
		cmd.Sub[child.Name] = sub
		for _, a := range child.Aliases {
			cmd.Sub[a] = sub
		}
	}
}

// addDefaultCommand lets a node's default command (kong's
// `default:"withargs"`, e.g. barn-plan's plan) complete without its name:
// kongplete completes only named subcommands, so `barn-plan -f <Tab>`
// offered command names instead of files. The default's flags and
// positional arguments become the node's own; its subcommands stay.
func addDefaultCommand(n *kong.Node, cmd *complete.Command) {
	if n.DefaultCmd == nil {
		return
	}
	def, ok := cmd.Sub[n.DefaultCmd.Name]
	if !ok {
		return
	}
	if cmd.Flags == nil {
		cmd.Flags = complete.Flags{}
	}
	for name, p := range def.GlobalFlags {
		if _, global := cmd.GlobalFlags[name]; !global {
			cmd.Flags[name] = p
		}
	}
	for name, p := range def.Flags {
		cmd.Flags[name] = p
	}
	if def.Args != nil {
		cmd.Args = def.Args
	}
}

// CompletionCmd prints the shell code that enables completion for this
// tool. It is meant to be evaluated by the shell:
//
//	bash: source <(barn-node completion bash)        (in ~/.bashrc)
//	zsh:  source <(barn-node completion zsh)         (in ~/.zshrc)
//	fish: barn-node completion fish | source         (in ~/.config/fish/config.fish)
type CompletionCmd struct {
	Shell string `arg:"" enum:"bash,zsh,fish" help:"bash, zsh or fish."`
}

// completionCode is the registration each shell needs for posener/complete's
// protocol; {bin} is the tool's absolute path as one shell word, {cmd} the
// same word quoted once more: `complete -C` stores a command line that the
// shell parses again at every Tab, {name} the tool's command name.
var completionCode = map[string]string{
	"bash": "complete -C {cmd} {name}\n",
	"zsh":  "autoload -U +X bashcompinit && bashcompinit\ncomplete -C {cmd} {name}\n",
	"fish": `function __complete_{name}
    set -lx COMP_LINE (commandline -cp)
    test -z (commandline -ct)
    and set COMP_LINE "$COMP_LINE "
    {bin}
end
complete -f -c {name} -a "(__complete_{name})"
`,
}

// Run prints the registration code for the shell.
func (c *CompletionCmd) Run(env *Env) error {
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	if abs, err := filepath.Abs(bin); err == nil {
		bin = abs
	}
	_, err = fmt.Fprint(env.Out, completionScript(c.Shell, bin, env.Tool))
	return err
}

// completionScript is the registration code of shell for the tool at the
// absolute path bin, called name.
func completionScript(shell, bin, name string) string {
	return strings.NewReplacer("{bin}", quote.ShellIfNeeded(bin), "{cmd}", quote.ShellIfNeeded(quote.ShellIfNeeded(bin)),
		"{name}", name).Replace(completionCode[shell])
}
