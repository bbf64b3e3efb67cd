// Package wiretest makes the attacks every strict Barn document reader
// must refuse, for the tests of the packages that read them.
package wiretest

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// Variants returns two attacks derived from doc, a JSON object with at
// least one member: "duplicate" repeats its first member and "case" adds
// an upper-case variant of the first member's name before it (encoding/json
// v1 would let either override the real value). Both keep every other byte.
func Variants(doc []byte) (map[string][]byte, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(doc))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, fmt.Errorf("wiretest: not a JSON object: %q", doc)
	}
	tok, err := dec.ReadToken()
	if err != nil || tok.Kind() != '"' {
		return nil, fmt.Errorf("wiretest: object has no first member: %q", doc)
	}
	name := tok.String() // copied: the token is only valid until the next read
	value, err := dec.ReadValue()
	if err != nil {
		return nil, err
	}
	start := bytes.IndexByte(doc, '{') + 1
	member := func(n string) []byte {
		key, _ := jsontext.AppendQuote(nil, n)
		return append(append(key, ':'), append(append([]byte{}, value...), ',')...)
	}
	splice := func(extra []byte) []byte {
		out := append([]byte{}, doc[:start]...)
		return append(append(out, extra...), doc[start:]...)
	}
	return map[string][]byte{
		"duplicate": splice(member(name)),
		"case":      splice(member(strings.ToUpper(name))),
	}, nil
}
