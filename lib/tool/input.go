package tool

import (
	"bytes"
	"fmt"
	"io"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/wire"
)

// MaxInputBytes bounds one JSON document read from a pipe (64 MiB).
const MaxInputBytes = 64 << 20

// PassthroughError carries an upstream barn.error/v1 document that arrived on
// stdin. Main writes Raw to stdout unchanged and exits with Class, so that in
// `a | b | c` the first failure is what the user sees and the exit status of
// the last tool, even without `set -o pipefail`.
type PassthroughError struct {
	Raw   []byte // the document as received, including its newline
	Class exitcode.Class
}

func (e *PassthroughError) Error() string {
	return fmt.Sprintf("upstream failure (%s) passed through", e.Class)
}

// ReadDocument reads exactly one JSON document of the given schema (for
// example "barn.spec/v1") from r into v, strictly: unknown fields and
// trailing data are usage errors naming source. An upstream barn.error/v1
// document is returned as a *PassthroughError. Empty input is a usage error,
// never an empty document.
func (e *Env) ReadDocument(r io.Reader, source, schema string, v any) error {
	data, err := io.ReadAll(io.LimitReader(r, MaxInputBytes+1))
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "reading %s", source)
	}
	if len(data) > MaxInputBytes {
		return exitcode.New(exitcode.Usage, "%s: input is larger than %d bytes", source, MaxInputBytes)
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return exitcode.New(exitcode.Usage, "%s: no input; expected a %s document", source, schema)
	}
	// A document may be compact (one line) or indented (--pretty upstream).
	doc := trimmed
	got := wire.SchemaOf(doc)
	if got == "" {
		doc = firstLine(trimmed)
		got = wire.SchemaOf(doc)
	}
	if got == wire.ErrorSchema {
		var ed wire.ErrorDoc
		if err := wire.DecodeStrict(doc, &ed); err == nil {
			class := exitcode.Class(ed.Error)
			if !class.Valid() || class == exitcode.OK {
				class = exitcode.Runtime
			}
			return &PassthroughError{Raw: append(append([]byte{}, doc...), '\n'), Class: class}
		}
	}
	if got != schema {
		if got == "" {
			return exitcode.New(exitcode.Usage, "%s: not a %s document (no schema field)", source, schema)
		}
		return exitcode.New(exitcode.Usage, "%s: expected a %s document, got %s", source, schema, got)
	}
	if err := wire.DecodeStrict(trimmed, v); err != nil {
		return exitcode.Wrap(exitcode.Usage, err, "%s: invalid %s document", source, schema)
	}
	return nil
}

func firstLine(b []byte) []byte {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return bytes.TrimSpace(b[:i])
	}
	return b
}
