package tool

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/itchyny/gojq"
	"go.yaml.in/yaml/v3"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/wire"
)

// TextRenderer is implemented by documents that have a human view for
// --text. Documents without one render as YAML under --text.
type TextRenderer interface {
	RenderText(w io.Writer) error
}

// Emit writes one document to stdout in the form the output flags select:
// canonical JSON (default), indented JSON (--pretty), YAML (--yaml), the
// results of a jq filter (--jq), or the document's human view (--text).
func (e *Env) Emit(doc any) error {
	return writeDoc(e.Out, e.Output, doc)
}

func writeDoc(w io.Writer, f OutputFlags, doc any) error {
	switch {
	case f.JQ != "":
		return writeJQ(w, f, doc)
	case f.Text:
		if t, ok := doc.(TextRenderer); ok {
			return t.RenderText(w)
		}
		return writeYAML(w, doc)
	case f.YAML:
		return writeYAML(w, doc)
	case f.Pretty:
		b, err := wire.MarshalIndent(doc)
		if err != nil {
			return err
		}
		_, err = w.Write(append(b, '\n'))
		return err
	default:
		return wire.Write(w, doc)
	}
}

func writeJQ(w io.Writer, f OutputFlags, doc any) error {
	q, err := gojq.Parse(f.JQ)
	if err != nil {
		return exitcode.New(exitcode.Usage, "--jq %q: %v", f.JQ, err)
	}
	code, err := gojq.Compile(q)
	if err != nil {
		return exitcode.New(exitcode.Usage, "--jq %q: %v", f.JQ, err)
	}
	input, err := jqValue(doc)
	if err != nil {
		return err
	}
	iter := code.Run(input)
	for {
		v, ok := iter.Next()
		if !ok {
			return nil
		}
		if err, isErr := v.(error); isErr {
			return exitcode.New(exitcode.Runtime, "--jq %q: %v", f.JQ, err)
		}
		if s, isString := v.(string); isString {
			if _, err := fmt.Fprintln(w, s); err != nil {
				return err
			}
			continue
		}
		inner := f
		inner.JQ, inner.Text = "", false
		if err := writeDoc(w, inner, v); err != nil {
			return err
		}
	}
}

// jqValue converts doc into the plain values gojq accepts (json.Number
// becomes int or float64).
func jqValue(doc any) (any, error) {
	g, err := wire.Generic(doc)
	if err != nil {
		return nil, err
	}
	return plainNumbers(g), nil
}

func plainNumbers(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			t[k] = plainNumbers(x)
		}
		return t
	case []any:
		for i, x := range t {
			t[i] = plainNumbers(x)
		}
		return t
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return int(i)
		}
		f, _ := t.Float64()
		return f
	default:
		return v
	}
}

func writeYAML(w io.Writer, doc any) error {
	v, err := jqValue(doc)
	if err != nil {
		return err
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return err
	}
	return enc.Close()
}
