package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/lazyre"
	"barn.dev/lib/wire"
)

// DecodeRepo parses repo.yaml strictly: one YAML document, at most
// MaxCatalogBytes, no unknown or duplicate keys, then Validate. source names
// the file in errors. Errors are *exitcode.Error of class usage with
// reason "invalid_repo_yaml" and Detail []Problem when validation failed.
func DecodeRepo(data []byte, source string) (*Repo, error) {
	bad := func(format string, args ...any) error {
		return exitcode.New(exitcode.Usage, "%s: %s", source, fmt.Sprintf(format, args...)).WithReason("invalid_repo_yaml")
	}
	if len(data) > MaxCatalogBytes {
		return nil, bad("file is %d bytes, larger than the %d byte limit", len(data), MaxCatalogBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var r Repo
	if err := dec.Decode(&r); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, bad("empty document; expected schema: 1 with revision, defaults and images")
		}
		return nil, bad("%s", yamlMessage(err))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, bad("more than one YAML document; repo.yaml must hold exactly one")
	}
	if ps := r.Validate(); len(ps) > 0 {
		var doc yaml.Node
		if yaml.Unmarshal(data, &doc) == nil {
			lines := map[string]int{}
			yamlLines(&doc, "", lines)
			for i := range ps {
				ps[i].Line = lineOf(lines, ps[i].Field)
			}
		}
		return nil, invalid(exitcode.Usage, "invalid_repo_yaml", source, ps)
	}
	return &r, nil
}

// DecodeCatalog parses catalog.json strictly (unknown fields and trailing
// data rejected, at most MaxCatalogBytes) and validates it. Errors are
// *exitcode.Error of class integrity, reason "invalid_catalog".
func DecodeCatalog(data []byte, source string) (*Catalog, error) {
	if len(data) > MaxCatalogBytes {
		return nil, exitcode.New(exitcode.Integrity, "%s: catalog is larger than %d bytes", source, MaxCatalogBytes).WithReason("catalog_too_large")
	}
	var c Catalog
	if err := wire.DecodeStrict(data, &c); err != nil {
		return nil, exitcode.New(exitcode.Integrity, "%s: %v", source, err).WithReason("invalid_catalog")
	}
	if ps := c.Validate(); len(ps) > 0 {
		return nil, invalid(exitcode.Integrity, "invalid_catalog", source, ps)
	}
	return &c, nil
}

func invalid(class exitcode.Class, reason, source string, ps []Problem) error {
	msg := fmt.Sprintf("%s: %s", source, ps[0])
	if len(ps) > 1 {
		msg += fmt.Sprintf(" (and %d more problems)", len(ps)-1)
	}
	return exitcode.New(class, "%s", msg).WithReason(reason).WithDetail(ps)
}

// Encode returns the bytes `barn-repo build` writes to catalog.json, in
// Barn 0.9's layout: encoding/json's MarshalIndent with two-space
// indentation (fields in declaration order, map keys sorted, empty optional
// fields omitted, <, > and & escaped) and a final newline. The same catalog
// always encodes to the same bytes.
func Encode(c *Catalog) ([]byte, error) {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

var notFoundRE = lazyre.New(`field (\S+) not found in type \S+`)

// yamlMessage turns yaml.v3 errors into "line N: unknown field X" style text.
func yamlMessage(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs := make([]string, len(te.Errors))
		for i, m := range te.Errors {
			msgs[i] = notFoundRE.ReplaceAllString(m, "unknown field $1")
		}
		return strings.Join(msgs, "; ")
	}
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

// yamlLines records the line of every mapping key and sequence item under
// the dotted paths Validate uses ("images.d12.aliases[0]").
func yamlLines(n *yaml.Node, path string, out map[string]int) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			yamlLines(c, path, out)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := n.Content[i].Value
			if path != "" {
				p = path + "." + p
			}
			out[p] = n.Content[i].Line
			yamlLines(n.Content[i+1], p, out)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			out[p] = c.Line
			yamlLines(c, p, out)
		}
	}
}

// lineOf returns the line of field or of its nearest known parent.
func lineOf(lines map[string]int, field string) int {
	for f := field; f != ""; {
		if l, ok := lines[f]; ok {
			return l
		}
		i := strings.LastIndexAny(f, ".[")
		if i < 0 {
			return 0
		}
		f = f[:i]
	}
	return 0
}
