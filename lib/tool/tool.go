// Package tool is the shared shape of a Barn command-line tool: the kong
// wiring, the output flags every tool has (--pretty, --yaml, --jq, --text),
// the `version` command, pipeline input (including pass-through of an
// upstream barn.error/v1 document), and the mapping of errors to exit
// classes and to the stderr/stdout error contract.
//
// A tool's main.go only wires the real world in:
//
//	func main() {
//		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//		code := cli.Main(ctx, os.Args[1:], tool.OSStdio(), os.Getenv)
//		stop()
//		os.Exit(code)
//	}
//
// and its cli package defines a kong grammar that embeds Globals and whose
// leaf commands have `Run(env *tool.Env) error`.
package tool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"golang.org/x/term"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/wire"
)

// Version is the Barn release, set at link time with
// -ldflags "-X barn.dev/lib/tool.Version=v0.1.0"; "dev" otherwise.
var Version = "dev"

// Stdio is a process's standard streams and whether they are terminals,
// injected so tests can run a tool in process.
type Stdio struct {
	In            io.Reader
	Out           io.Writer
	Err           io.Writer
	InIsTerminal  bool // stdin is a terminal: prompts may be asked
	OutIsTerminal bool // stdout is a terminal: a person reads the output (text by default)
	ErrIsTerminal bool // stderr is a terminal: live progress may be drawn
	// OpenTTY opens the controlling terminal for a prompt when stdin is
	// taken; nil means there is none (tests).
	OpenTTY func() (io.ReadWriteCloser, error)
}

// OSStdio returns the real process streams.
func OSStdio() Stdio {
	return Stdio{
		In: os.Stdin, Out: os.Stdout, Err: os.Stderr,
		InIsTerminal:  term.IsTerminal(int(os.Stdin.Fd())),
		OutIsTerminal: term.IsTerminal(int(os.Stdout.Fd())),
		ErrIsTerminal: term.IsTerminal(int(os.Stderr.Fd())),
		OpenTTY:       OpenTTY,
	}
}

// OutputFlags are the presentation flags shared by every tool. They never
// change an exit status.
//
// Without one of them the form is chosen once, before the command runs:
// BARN_OUTPUT=json|yaml|text when set, else the human view when stdout is
// a terminal, else canonical JSON. So a pipe or a file always gets JSON,
// and a person at a terminal gets text; --json asks for JSON anywhere.
type OutputFlags struct {
	JSON   bool   `name:"json" help:"Print canonical JSON (the default unless stdout is a terminal)."`
	Pretty bool   `help:"Indent JSON output."`
	YAML   bool   `name:"yaml" help:"Render output as YAML."`
	JQ     string `name:"jq" placeholder:"EXPR" help:"Filter JSON output with a jq expression (gojq); strings print raw."`
	Text   bool   `help:"Render a human view (the default when stdout is a terminal)."`
}

// EnvOutput names the default output form (json, yaml or text) for when
// no presentation flag is given.
const EnvOutput = "BARN_OUTPUT"

// explicit reports whether any presentation flag was given.
func (f OutputFlags) explicit() bool {
	return f.JSON || f.Pretty || f.YAML || f.JQ != "" || f.Text
}

// resolveOutput fills in the default form (see OutputFlags).
func resolveOutput(f OutputFlags, getenv func(string) string, outIsTerminal bool) (OutputFlags, error) {
	if f.explicit() {
		n := 0
		for _, set := range []bool{f.JSON || f.Pretty, f.YAML, f.Text} {
			if set {
				n++
			}
		}
		if n > 1 {
			return f, exitcode.New(exitcode.Usage, "--json/--pretty, --yaml and --text exclude each other")
		}
		return f, nil
	}
	switch v := getenv(EnvOutput); v {
	case "json":
		f.JSON = true
	case "yaml":
		f.YAML = true
	case "text":
		f.Text = true
	case "":
		f.Text = outIsTerminal
	default:
		return f, exitcode.New(exitcode.Usage, "%s=%q: want json, yaml or text", EnvOutput, v)
	}
	return f, nil
}

// Globals is embedded in every tool's kong grammar.
type Globals struct {
	OutputFlags
	Version    VersionCmd    `cmd:"" aliases:"ver" help:"Print the tool's version."`
	Completion CompletionCmd `cmd:"" help:"Print the shell code that enables tab completion: source <(TOOL completion bash)."`
}

func (g *Globals) globals() *Globals { return g }

type hasGlobals interface{ globals() *Globals }

// VersionCmd prints a barn.version/v1 document.
type VersionCmd struct{}

// VersionDoc is the output of `<tool> version`.
type VersionDoc struct {
	Schema  string `json:"schema"`
	Tool    string `json:"tool"`
	Version string `json:"version"`
	Go      string `json:"go"`
}

// RenderText implements TextRenderer.
func (d VersionDoc) RenderText(w io.Writer) error {
	_, err := fmt.Fprintf(w, "%s %s (%s)\n", d.Tool, d.Version, d.Go)
	return err
}

// Run prints the version.
func (VersionCmd) Run(env *Env) error {
	v, goVersion := Version, "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		if v == "dev" {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" && len(s.Value) >= 12 {
					v = "dev+" + s.Value[:12]
				}
			}
		}
	}
	return env.Emit(VersionDoc{Schema: "barn.version/v1", Tool: env.Tool, Version: v, Go: goVersion})
}

// Env is what a command's Run receives: the context (cancelled on
// SIGINT/SIGTERM), the streams, the environment and the output flags.
type Env struct {
	Ctx    context.Context
	Tool   string // e.g. "barn-plan"
	Args   []string
	Getenv func(string) string
	Now    func() time.Time
	// Started is when the tool began: a command's elapsed time is Now() - Started.
	Started time.Time
	Stdio
	Output OutputFlags
}

// Stderrf writes one diagnostic or progress line to stderr. It never writes
// to stdout.
func (e *Env) Stderrf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !strings.HasSuffix(msg, "\n") {
		msg += "\n"
	}
	_, _ = io.WriteString(e.Err, msg)
}

// Main parses args against grammar (a pointer to a kong struct embedding
// Globals), runs the selected command and returns the process exit status.
// Errors are reported as "<name>: error: <message>" (and "next: <command>")
// on stderr and, unless stdout is a terminal, a barn.error/v1 document on
// stdout.
//
// Before parsing, Main answers the shell's completion requests (COMP_LINE
// set; see CompletionCmd) and greets a bare invocation when the grammar is
// a Welcomer.
func Main(ctx context.Context, name, help string, args []string, stdio Stdio, getenv func(string) string, grammar any) (code int) {
	env := &Env{Ctx: ctx, Tool: name, Args: args, Getenv: getenv, Now: time.Now, Started: time.Now(), Stdio: stdio}
	if env.Getenv == nil {
		env.Getenv = func(string) string { return "" }
	}
	type exitSignal struct{ code int }
	defer func() {
		if r := recover(); r != nil {
			if s, ok := r.(exitSignal); ok {
				code = s.code
				return
			}
			panic(r)
		}
	}()
	parser, err := kong.New(grammar,
		kong.Name(name),
		kong.Description(help),
		kong.Writers(stdio.Out, stdio.Err),
		kong.Exit(func(c int) { panic(exitSignal{c}) }),
		kong.Bind(env),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
	)
	if err != nil {
		return report(env, exitcode.Wrap(exitcode.Runtime, err, "building command line"))
	}
	if completing(env.Getenv) {
		return runCompletion(env, parser, grammar, args)
	}
	if flags, bare := bareInvocation(args); bare {
		if code, welcomed := welcome(env, grammar, flags, help); welcomed {
			return code
		}
	}
	kctx, err := parser.Parse(args)
	if g, ok := grammar.(hasGlobals); ok {
		env.Output = g.globals().OutputFlags
	}
	if err != nil {
		e := exitcode.New(exitcode.Usage, "%s", err.Error()).WithNext(name + " --help")
		return report(env, e)
	}
	if env.Output, err = resolveOutput(env.Output, env.Getenv, env.OutIsTerminal); err != nil {
		return report(env, err)
	}
	if err := kctx.Run(env); err != nil {
		return report(env, err)
	}
	return 0
}

// welcome answers a bare invocation (output flags only) with the
// grammar's Welcome document, when it has one; welcomed is false when it
// has none and the command line is parsed as usual.
func welcome(env *Env, grammar any, flags OutputFlags, help string) (code int, welcomed bool) {
	w, ok := grammar.(Welcomer)
	if !ok {
		return 0, false
	}
	doc := w.Welcome(env)
	if doc == nil {
		return 0, false
	}
	if doc.Err != nil {
		return report(env, doc.Err), true
	}
	var err error
	if env.Output, err = resolveOutput(flags, env.Getenv, env.OutIsTerminal); err != nil {
		return report(env, err), true
	}
	doc.Schema, doc.Tool = WelcomeSchema, env.Tool
	if doc.Summary == "" {
		doc.Summary = help
	}
	if err := env.Emit(doc); err != nil {
		return report(env, err), true
	}
	return 0, true
}

// bareInvocation reports whether args name no command: nothing, or only
// the form flags --json, --pretty, --yaml and --text.
func bareInvocation(args []string) (OutputFlags, bool) {
	var f OutputFlags
	for _, a := range args {
		switch a {
		case "--json":
			f.JSON = true
		case "--pretty":
			f.Pretty = true
		case "--yaml":
			f.YAML = true
		case "--text":
			f.Text = true
		default:
			return f, false
		}
	}
	return f, true
}

// report prints err per the error contract and returns its exit status.
func report(env *Env, err error) int {
	var status *ExitStatusError
	if errors.As(err, &status) {
		return status.Code
	}
	var silent *SilentExit
	if errors.As(err, &silent) {
		return silent.Class.Code()
	}
	var pass *PassthroughError
	if errors.As(err, &pass) {
		_, _ = env.Out.Write(pass.Raw)
		return pass.Class.Code()
	}
	e := exitcode.As(err)
	if e.Class == exitcode.OK {
		return 0
	}
	if ErrorHook != nil {
		ErrorHook(e)
	}
	fmt.Fprintf(env.Err, "%s: error: %s\n", env.Tool, e.Message)
	if e.Next != "" {
		fmt.Fprintf(env.Err, "next: %s\n", e.Next)
	}
	var reported *ReportedError
	if errors.As(err, &reported) || env.OutIsTerminal {
		// A terminal gets the message above only; a pipe or a file also
		// gets the barn.error/v1 document.
		return e.Class.Code()
	}
	doc := wire.ErrorDoc{Schema: wire.ErrorSchema, Error: string(e.Class), Message: e.Message,
		Reason: e.Reason, Next: e.Next, Detail: e.Detail}
	flags := env.Output
	flags.JQ, flags.Text = "", false
	if werr := writeDoc(env.Out, flags, doc); werr != nil {
		fmt.Fprintf(env.Err, "%s: error: writing error document: %v\n", env.Tool, werr)
	}
	return e.Class.Code()
}

// ErrorHook, when set, sees every error Main reports, before it is
// printed. Only test binaries set it (the script harness checks each
// message and reason); it must not change e.
var ErrorHook func(e *exitcode.Error)

// SilentExit is returned by a command that has already written its result
// document (for example `validate` reporting an invalid inventory) and only
// needs the process to exit with Class: nothing more is printed.
type SilentExit struct{ Class exitcode.Class }

func (e *SilentExit) Error() string { return fmt.Sprintf("exit %s", e.Class) }
