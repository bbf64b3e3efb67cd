package cli

import (
	"fmt"
	"io"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/state"
	"barn.dev/lib/tool"
)

// VerifyCmd checks the whole state root and never modifies it.
type VerifyCmd struct{}

// VerifyDoc is barn.state.verify/v1, printed when nothing is wrong.
type VerifyDoc struct {
	Schema   string          `json:"schema"`
	Root     string          `json:"root"`
	OK       bool            `json:"ok"`
	Problems []state.Problem `json:"problems"`
}

// RenderText implements tool.TextRenderer.
func (d VerifyDoc) RenderText(w io.Writer) error {
	if d.OK {
		_, err := fmt.Fprintf(w, "%s: ok\n", d.Root)
		return err
	}
	for _, p := range d.Problems {
		if _, err := fmt.Fprintf(w, "%s: %s: %s\n", p.Class, p.File, p.Message); err != nil {
			return err
		}
	}
	return nil
}

// Run verifies. With problems it lists each one on stderr ("<class>: <file>:
// <message>") and fails with integrity (7) whose detail is the full list.
func (c *VerifyCmd) Run(env *tool.Env) error {
	r, err := inspect(env)
	if err != nil {
		return err
	}
	problems := r.Verify()
	if len(problems) == 0 {
		return env.Emit(VerifyDoc{Schema: "barn.state.verify/v1", Root: r.Dir, OK: true, Problems: problems})
	}
	for _, p := range problems {
		env.Stderrf("%s: %s: %s", p.Class, p.File, p.Message)
		if p.Next != "" {
			env.Stderrf("  to settle it: %s", p.Next)
		}
	}
	noun := "problems"
	if len(problems) == 1 {
		noun = "problem"
	}
	return exitcode.New(exitcode.Integrity, "%d %s in the state root %s", len(problems), noun, r.Dir).
		WithReason("state_damaged").WithDetail(problems).WithNext(state.OneNext(problems))
}
