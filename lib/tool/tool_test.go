package tool

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/wire/wiretest"
)

func env(in string, terminal bool) (*Env, *bytes.Buffer, *bytes.Buffer) {
	var out, errw bytes.Buffer
	return &Env{Ctx: context.Background(), Tool: "barn-test",
		Stdio: Stdio{In: strings.NewReader(in), Out: &out, Err: &errw, InIsTerminal: terminal}}, &out, &errw
}

// fakeTTY is a controlling terminal whose answer is fixed.
type fakeTTY struct {
	answer  io.Reader
	written bytes.Buffer
}

func (t *fakeTTY) Read(p []byte) (int, error)  { return t.answer.Read(p) }
func (t *fakeTTY) Write(p []byte) (int, error) { return t.written.Write(p) }
func (*fakeTTY) Close() error                  { return nil }

func TestConfirm(t *testing.T) {
	cases := []struct {
		name       string
		in         string
		terminal   bool
		tty        string // "" = no controlling terminal
		stdinTaken bool
		noPrompt   bool // BARN_TERMINAL_PROMPT=0
		force      bool
		want       exitcode.Class
	}{
		{name: "force skips the prompt", force: true, want: exitcode.OK},
		{name: "no terminal needs --force", in: "destroy\n", want: exitcode.Usage},
		{name: "the exact word confirms", in: "destroy\n", terminal: true, want: exitcode.OK},
		{name: "an empty answer cancels", in: "\n", terminal: true, want: exitcode.Cancelled},
		{name: "EOF cancels", terminal: true, want: exitcode.Cancelled},
		{name: "another word cancels", in: "yes\n", terminal: true, want: exitcode.Cancelled},
		{name: "stdin taken: the controlling terminal is asked", in: "{}", tty: "destroy\n", stdinTaken: true, want: exitcode.OK},
		{name: "stdin taken: the terminal's no cancels", in: "{}", tty: "no\n", stdinTaken: true, want: exitcode.Cancelled},
		{name: "stdin taken even when it is a terminal", in: "destroy\n", terminal: true, stdinTaken: true, want: exitcode.Usage},
		{name: "a pipe on stdin: the controlling terminal is asked", in: "", tty: "destroy\n", want: exitcode.OK},
		{name: "BARN_TERMINAL_PROMPT=0 never asks the terminal", tty: "destroy\n", stdinTaken: true, noPrompt: true, want: exitcode.Usage},
	}
	for _, c := range cases {
		e, _, _ := env(c.in, c.terminal)
		var tty *fakeTTY
		if c.tty != "" {
			tty = &fakeTTY{answer: strings.NewReader(c.tty)}
			e.OpenTTY = func() (io.ReadWriteCloser, error) { return tty, nil }
		}
		e.Getenv = func(k string) string {
			if k == EnvTerminalPrompt && c.noPrompt {
				return "0"
			}
			return ""
		}
		err := e.Confirm(c.force, c.stdinTaken, "destroy", "This destroys meta.")
		if got := exitcode.ClassOf(err); got != c.want {
			t.Errorf("%s: class %s, want %s (%v)", c.name, got, c.want, err)
		}
		if tty != nil && c.want != exitcode.Usage && !strings.Contains(tty.written.String(), "This destroys meta.") {
			t.Errorf("%s: the prompt was not written to the terminal: %q", c.name, tty.written.String())
		}
	}
}

func TestResolveOutput(t *testing.T) {
	get := func(v string) func(string) string { return func(string) string { return v } }
	cases := []struct {
		name     string
		flags    OutputFlags
		env      string
		terminal bool
		want     OutputFlags
		err      bool
	}{
		{name: "pipe: JSON", want: OutputFlags{}},
		{name: "terminal: text", terminal: true, want: OutputFlags{Text: true}},
		{name: "terminal with --json", flags: OutputFlags{JSON: true}, terminal: true, want: OutputFlags{JSON: true}},
		{name: "terminal with --jq", flags: OutputFlags{JQ: "."}, terminal: true, want: OutputFlags{JQ: "."}},
		{name: "BARN_OUTPUT=json on a terminal", env: "json", terminal: true, want: OutputFlags{JSON: true}},
		{name: "BARN_OUTPUT=text on a pipe", env: "text", want: OutputFlags{Text: true}},
		{name: "a flag beats BARN_OUTPUT", flags: OutputFlags{YAML: true}, env: "text", want: OutputFlags{YAML: true}},
		{name: "BARN_OUTPUT=xml", env: "xml", err: true},
		{name: "--text and --yaml", flags: OutputFlags{Text: true, YAML: true}, err: true},
	}
	for _, c := range cases {
		got, err := resolveOutput(c.flags, get(c.env), c.terminal)
		if (err != nil) != c.err || (err == nil && got != c.want) {
			t.Errorf("%s: got %+v, %v; want %+v (error %v)", c.name, got, err, c.want, c.err)
		}
	}
}

type doc struct {
	Schema string `json:"schema"`
	N      int    `json:"n"`
}

func TestReadDocument(t *testing.T) {
	var d doc
	e, _, _ := env("", false)
	if err := e.ReadDocument(strings.NewReader("{\n  \"n\": 3,\n  \"schema\": \"barn.t/v1\"\n}\n"), "stdin", "barn.t/v1", &d); err != nil || d.N != 3 {
		t.Fatalf("indented input: %v %+v", err, d)
	}
	errDoc := `{"error":"integrity","message":"damaged","schema":"barn.error/v1"}`
	err := e.ReadDocument(strings.NewReader(errDoc+"\n"), "stdin", "barn.t/v1", &d)
	var pass *PassthroughError
	if !errors.As(err, &pass) || pass.Class != exitcode.Integrity || string(pass.Raw) != errDoc+"\n" {
		t.Fatalf("error document not passed through: %v", err)
	}
	for _, bad := range []string{"", "   \n", `{"schema":"barn.other/v1"}`, `{"schema":"barn.t/v1","extra":1}`, `garbage`} {
		if err := e.ReadDocument(strings.NewReader(bad), "stdin", "barn.t/v1", &d); exitcode.ClassOf(err) != exitcode.Usage {
			t.Errorf("input %q: class %s, want usage", bad, exitcode.ClassOf(err))
		}
	}
}

type grammar struct {
	Globals
	Fail failCmd `cmd:"" help:"Fail."`
}

type failCmd struct{}

func (failCmd) Run(env *Env) error {
	return exitcode.New(exitcode.Conflict, "plan is stale").WithReason("stale_plan").WithNext("barn-plan")
}

func TestMainErrorContract(t *testing.T) {
	var out, errw bytes.Buffer
	code := Main(context.Background(), "barn-test", "test tool", []string{"fail"},
		Stdio{In: strings.NewReader(""), Out: &out, Err: &errw}, nil, &grammar{})
	if code != 4 {
		t.Errorf("exit %d, want 4", code)
	}
	if got, want := errw.String(), "barn-test: error: plan is stale\nnext: barn-plan\n"; got != want {
		t.Errorf("stderr %q, want %q", got, want)
	}
	if got, want := out.String(), `{"error":"conflict","message":"plan is stale","next":"barn-plan","reason":"stale_plan","schema":"barn.error/v1"}`+"\n"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	out.Reset()
	errw.Reset()
	if code := Main(context.Background(), "barn-test", "test tool", []string{"--bogus"},
		Stdio{In: strings.NewReader(""), Out: &out, Err: &errw}, nil, &grammar{}); code != 2 {
		t.Errorf("kong parse error exit %d, want 2 (not kong's 80)", code)
	}
}

// TestReadDocumentRefusesDuplicateAndCaseVariantNames: a piped spec or
// plan that repeats a member name or varies its case is a usage error,
// never a document whose last duplicate wins.
func TestReadDocumentRefusesDuplicateAndCaseVariantNames(t *testing.T) {
	e, _, _ := env("", false)
	variants, err := wiretest.Variants([]byte(`{"n":3,"schema":"barn.t/v1"}`))
	if err != nil {
		t.Fatal(err)
	}
	variants["nested"] = []byte(`{"n":3,"schema":"barn.t/v1","schema":"barn.t/v1"}`)
	for kind, bad := range variants {
		var d doc
		err := e.ReadDocument(bytes.NewReader(bad), "stdin", "barn.t/v1", &d)
		if exitcode.ClassOf(err) != exitcode.Usage || !strings.Contains(err.Error(), "stdin") {
			t.Errorf("%s name %s: %v, want usage naming stdin", kind, bad, err)
		}
	}
}
