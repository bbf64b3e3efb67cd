package tool

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
)

func env(in string, terminal bool) (*Env, *bytes.Buffer, *bytes.Buffer) {
	var out, errw bytes.Buffer
	return &Env{Ctx: context.Background(), Tool: "barn-test",
		Stdio: Stdio{In: strings.NewReader(in), Out: &out, Err: &errw, InIsTerminal: terminal}}, &out, &errw
}

func TestConfirm(t *testing.T) {
	cases := []struct {
		name     string
		in       string
		terminal bool
		force    bool
		want     exitcode.Class
	}{
		{"force skips the prompt", "", false, true, exitcode.OK},
		{"no terminal needs --force", "destroy\n", false, false, exitcode.Usage},
		{"the exact word confirms", "destroy\n", true, false, exitcode.OK},
		{"an empty answer cancels", "\n", true, false, exitcode.Cancelled},
		{"EOF cancels", "", true, false, exitcode.Cancelled},
		{"another word cancels", "yes\n", true, false, exitcode.Cancelled},
	}
	for _, c := range cases {
		e, _, _ := env(c.in, c.terminal)
		err := e.Confirm(c.force, "destroy", "This destroys meta.")
		if got := exitcode.ClassOf(err); got != c.want {
			t.Errorf("%s: class %s, want %s (%v)", c.name, got, c.want, err)
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
