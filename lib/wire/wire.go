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
	"fmt"
	"io"
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

// DecodeStrict decodes exactly one JSON value from data into v, rejecting
// unknown object fields and any non-whitespace data after the value.
func DecodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err != io.EOF {
		if err == nil {
			return fmt.Errorf("trailing data after the JSON document")
		}
		return fmt.Errorf("trailing data after the JSON document: %w", err)
	}
	return nil
}

// SchemaOf returns the top-level "schema" string of a JSON object, or "" when
// data is not an object or has no string schema.
func SchemaOf(data []byte) string {
	var probe struct {
		Schema any `json:"schema"`
	}
	if json.Unmarshal(data, &probe) != nil {
		return ""
	}
	s, _ := probe.Schema.(string)
	return s
}
