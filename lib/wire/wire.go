// Package wire is Barn's canonical JSON: the one encoding every tool writes
// on stdout, persists, and hashes.
//
// Canonical JSON here means: object keys sorted by byte order, no
// insignificant whitespace, UTF-8, no HTML escaping of <, > and &, numbers
// written as Go's encoding/json writes them, and (for documents written to a
// stream) one document per line terminated by "\n". Hashes are hex SHA-256 of
// the canonical bytes.
package wire

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// ErrorSchema is the schema name of the error document.
const ErrorSchema = "barn.error/v1"

// ErrorDoc is the barn.error/v1 document a failing tool writes on stdout.
type ErrorDoc struct {
	Schema  string `json:"schema"`
	Error   string `json:"error"` // an exitcode.Class
	Message string `json:"message"`
	Reason  string `json:"reason,omitempty"`
	Next    string `json:"next,omitempty"`
	Detail  any    `json:"detail,omitempty"`
}

// Marshal returns the canonical JSON encoding of v, without a trailing
// newline.
func Marshal(v any) ([]byte, error) {
	plain, err := marshalNoEscape(v)
	if err != nil {
		return nil, err
	}
	// Round-trip through generic values so that struct fields are ordered
	// like map keys (encoding/json sorts map keys).
	var generic any
	dec := json.NewDecoder(bytes.NewReader(plain))
	dec.UseNumber()
	if err := dec.Decode(&generic); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	return marshalNoEscape(generic)
}

func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// MarshalIndent returns the canonical encoding of v indented by two spaces,
// without a trailing newline.
func MarshalIndent(v any) ([]byte, error) {
	b, err := Marshal(v)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// Write writes the canonical encoding of v followed by "\n".
func Write(w io.Writer, v any) error {
	b, err := Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// Hash returns the hex SHA-256 of the canonical encoding of v.
func Hash(v any) (string, error) {
	b, err := Marshal(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// MustHash is Hash for values that are known to be encodable (plain structs
// of strings, numbers, bools, slices and maps); it panics otherwise.
func MustHash(v any) string {
	h, err := Hash(v)
	if err != nil {
		panic(fmt.Sprintf("wire.MustHash: %v", err))
	}
	return h
}

// Generic decodes canonical or plain JSON into generic values (maps, slices,
// json.Number, strings, bools, nil), as jq and YAML rendering need.
func Generic(v any) (any, error) {
	b, err := Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// DecodeStrict decodes exactly one JSON value from data into v, the way
// every persisted or piped Barn document is read. It refuses, with a
// *DecodeError naming the line and column:
//   - a member name that is not one of v's field names exactly: unknown
//     names and case variants alike (encoding/json v1 would decode
//     {"generation":1,"GENERATION":7} as 7);
//   - an object that repeats a member name, at any depth, maps included;
//   - invalid UTF-8, and any non-whitespace data after the value.
//
// It is encoding/json/v2's semantics (github.com/go-json-experiment/json,
// the module that mirrors the standard library's json/v2) with unknown
// members rejected.
func DecodeStrict(data []byte, v any) error {
	if err := jsonv2.Unmarshal(data, v, jsonv2.RejectUnknownMembers(true)); err != nil {
		return describe(data, err)
	}
	return nil
}

// DecodeError is a strict decoding failure at a position in the input.
type DecodeError struct {
	Line, Column int    // 1-based; 0 when the position is unknown
	Pointer      string // RFC 6901 JSON Pointer of the offending member or value; "" for the whole document
	Problem      string // what is wrong, in Barn's words
	Err          error  // the decoder's error
}

func (e *DecodeError) Error() string {
	msg := e.Problem
	if msg == "" {
		msg = e.Err.Error()
	}
	if e.Line == 0 {
		return msg
	}
	return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, msg)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// describe turns a json/v2 error into a DecodeError at its line and column,
// saying in plain words what a strict read refused.
func describe(data []byte, err error) error {
	off := int64(-1)
	de := &DecodeError{Err: err}
	var syn *jsontext.SyntacticError
	var sem *jsonv2.SemanticError
	switch {
	case errors.As(err, &syn):
		off, de.Pointer = syn.ByteOffset, string(syn.JSONPointer)
		switch {
		case errors.Is(syn.Err, jsontext.ErrDuplicateName):
			de.Problem = fmt.Sprintf("duplicate field %q%s", lastToken(de.Pointer), within(de.Pointer))
		case trailingData(data):
			de.Problem = "trailing data after the JSON document"
		case syn.Err != nil:
			de.Problem = syn.Err.Error()
			if de.Pointer != "" {
				de.Problem += " in " + de.Pointer
			}
		}
	case errors.As(err, &sem):
		off, de.Pointer = sem.ByteOffset, string(sem.JSONPointer)
		if errors.Is(sem.Err, jsonv2.ErrUnknownName) {
			de.Problem = fmt.Sprintf("unknown field %q%s (field names are exact and case-sensitive)", lastToken(de.Pointer), within(de.Pointer))
		} else {
			de.Problem = strings.TrimPrefix(sem.Error(), "json: ")
		}
	}
	if off >= 0 && off <= int64(len(data)) {
		de.Line = 1 + bytes.Count(data[:off], []byte("\n"))
		de.Column = int(off - int64(bytes.LastIndexByte(data[:off], '\n')))
	}
	return de
}

// trailingData reports whether data starts with one complete JSON value
// followed by something other than whitespace.
func trailingData(data []byte) bool {
	dec := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if _, err := dec.ReadValue(); err != nil {
		return false
	}
	_, err := dec.ReadToken()
	return err != io.EOF
}

// lastToken is the unescaped last reference token of a JSON Pointer.
func lastToken(ptr string) string {
	return jsontext.Pointer(ptr).LastToken()
}

// within names the object holding a pointer's last member, "" at the top.
func within(ptr string) string {
	if parent := ptr[:max(strings.LastIndexByte(ptr, '/'), 0)]; parent != "" {
		return " in " + parent
	}
	return ""
}

// SchemaOf returns the top-level "schema" string of a JSON object, or ""
// when data is not one well-formed object (duplicate names included) or
// has no string member named exactly "schema".
func SchemaOf(data []byte) string {
	var probe struct {
		Schema any `json:"schema"`
	}
	if jsonv2.Unmarshal(data, &probe) != nil {
		return ""
	}
	s, _ := probe.Schema.(string)
	return s
}
