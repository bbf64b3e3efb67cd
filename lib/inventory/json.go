package inventory

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Ansible's DataLoader (parsing/utils/yaml.py from_yaml) reads every
// inventory and vars file with Python's json.loads first and falls back
// to YAML only when that fails. The difference is visible: JSON 1e5 is the
// float 100000.0, YAML 1.1 1e5 is a string. So a file that is JSON is read
// as JSON here too, into yaml.Nodes whose explicit tags carry JSON's types.

type jsonKind int

const (
	jsonNone      jsonKind = iota // not JSON: read as YAML
	jsonStrict                    // JSON that Go and Python both accept
	jsonNonFinite                 // JSON only with Python's NaN/Infinity extension
)

// jsonForm reports whether Python's json.loads would accept data.
func jsonForm(data []byte) jsonKind {
	if json.Valid(data) {
		return jsonStrict
	}
	if bytes.Contains(data, []byte("NaN")) || bytes.Contains(data, []byte("Infinity")) {
		if json.Valid(finiteJSON(data)) {
			return jsonNonFinite
		}
	}
	return jsonNone
}

// finiteJSON replaces Python's bare NaN, Infinity and -Infinity tokens
// (outside strings) with 0.
func finiteJSON(data []byte) []byte {
	var out []byte
	inString, escaped := false, false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			out = append(out, c)
			continue
		}
		if c == '"' {
			inString = true
		}
		replaced := false
		for _, tok := range []string{"-Infinity", "Infinity", "NaN"} {
			if bytes.HasPrefix(data[i:], []byte(tok)) {
				out = append(out, '0')
				i += len(tok) - 1
				replaced = true
				break
			}
		}
		if !replaced {
			out = append(out, c)
		}
	}
	return out
}

// jsonNode decodes one valid JSON document into a yaml.Node tree with
// positions: objects are mappings, arrays sequences, strings !!str
// (double-quoted), numbers !!int when written without fraction or exponent
// (Python's int) and !!float otherwise, true/false !!bool, null !!null.
func jsonNode(data []byte) (*yaml.Node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	lines := lineStarts(data)
	var parse func(depth int) (*yaml.Node, error)
	parse = func(depth int) (*yaml.Node, error) {
		if depth > maxValueDepth {
			return nil, errors.New("nesting is deeper than 64 levels")
		}
		start := skipJSONSeparators(data, int(dec.InputOffset()))
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		n := &yaml.Node{Style: yaml.TaggedStyle}
		n.Line, n.Column = position(lines, start)
		switch t := tok.(type) {
		case json.Delim:
			closing := json.Delim('}')
			n.Kind, n.Tag, n.Style = yaml.MappingNode, "!!map", yaml.FlowStyle
			if t == '[' {
				closing, n.Kind, n.Tag = ']', yaml.SequenceNode, "!!seq"
			}
			for dec.More() {
				if n.Kind == yaml.MappingNode {
					k, err := parse(depth + 1)
					if err != nil {
						return nil, err
					}
					n.Content = append(n.Content, k)
				}
				v, err := parse(depth + 1)
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, v)
			}
			if end, err := dec.Token(); err != nil || end != closing {
				return nil, fmt.Errorf("unbalanced %c", t)
			}
		case string:
			n.Kind, n.Tag, n.Value, n.Style = yaml.ScalarNode, "!!str", t, yaml.TaggedStyle|yaml.DoubleQuotedStyle
		case json.Number:
			n.Kind, n.Tag, n.Value = yaml.ScalarNode, "!!int", t.String()
			if strings.ContainsAny(n.Value, ".eE") {
				n.Tag = "!!float"
			}
		case bool:
			n.Kind, n.Tag, n.Value = yaml.ScalarNode, "!!bool", fmt.Sprint(t)
		case nil:
			n.Kind, n.Tag, n.Value = yaml.ScalarNode, "!!null", "null"
		}
		return n, nil
	}
	root, err := parse(0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON value")
	}
	return root, nil
}

// skipJSONSeparators returns the offset of the next token at or after off.
func skipJSONSeparators(data []byte, off int) int {
	for off < len(data) && strings.IndexByte(" \t\r\n,:", data[off]) >= 0 {
		off++
	}
	return off
}

// lineStarts returns the offset of the first byte of every line.
func lineStarts(data []byte) []int {
	starts := []int{0}
	for i, c := range data {
		if c == '\n' {
			starts = append(starts, i+1)
		}
	}
	return starts
}

// position converts a byte offset to a 1-based line and column (columns
// count bytes).
func position(starts []int, off int) (line, col int) {
	lo, hi := 0, len(starts)-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if starts[mid] <= off {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo + 1, off - starts[lo] + 1
}
