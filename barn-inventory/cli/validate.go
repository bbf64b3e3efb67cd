package cli

import (
	"fmt"
	"io"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/inventory"
	"barn.dev/lib/tool"
)

// ValidationSchema is the schema of the validate document.
const ValidationSchema = "barn.validation/v1"

// Validation is the output of `validate`: every problem of the file, not
// just the first. SpecHash is "" when invalid.
type Validation struct {
	Schema   string              `json:"schema"`
	Valid    bool                `json:"valid"`
	Source   string              `json:"source"`
	SpecHash string              `json:"spec_hash"`
	Warnings []inventory.Warning `json:"warnings"`
	Errors   []inventory.Problem `json:"errors"`
}

// RenderText prints "ok"/"invalid" and one line per problem and warning.
func (v Validation) RenderText(w io.Writer) error {
	if v.Valid {
		fmt.Fprintf(w, "%s: valid (spec %s)\n", v.Source, v.SpecHash)
	} else {
		fmt.Fprintf(w, "%s: invalid, %d problem(s)\n", v.Source, len(v.Errors))
	}
	for _, p := range v.Errors {
		fmt.Fprintf(w, "error: %s\n", p)
	}
	for _, x := range v.Warnings {
		fmt.Fprintf(w, "warning: %s\n", x.Message)
	}
	return nil
}

type validateCmd struct {
	fileFlag
}

func (c *validateCmd) Run(env *tool.Env) error {
	in, err := c.read(env)
	if err != nil {
		return err
	}
	s, ws, err := inventory.ResolveInput(in)
	doc := Validation{Schema: ValidationSchema, Source: in.Name, Warnings: ws, Errors: inventory.Problems(err)}
	if doc.Warnings == nil {
		doc.Warnings = []inventory.Warning{}
	}
	if doc.Errors == nil {
		doc.Errors = []inventory.Problem{}
	}
	if err != nil && len(doc.Errors) == 0 {
		return err
	}
	if s != nil {
		doc.Valid, doc.SpecHash = true, s.SpecHash
	}
	if err := env.Emit(doc); err != nil {
		return err
	}
	if !doc.Valid {
		for _, p := range doc.Errors {
			env.Stderrf("%s: error: %s", env.Tool, p)
		}
		// The validation document is the answer; exit 2 without a second
		// (barn.error/v1) document on stdout.
		return &tool.SilentExit{Class: exitcode.Usage}
	}
	return nil
}
