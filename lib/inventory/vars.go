package inventory

import (
	"encoding/json"
	"strings"

	"go.yaml.in/yaml/v3"

	"barn.dev/lib/inventory/yaml11"
)

func scalarOf(n *yaml.Node) yaml11.Scalar { return yaml11.Resolve(n) }

// fingerprint is what two definitions are compared by: vm_version by its
// spelling (9.1 and 9.10 differ), everything else after decoding.
func (r *reader) fingerprint(key string, n *yaml.Node) string {
	if n == nil {
		return "null"
	}
	if key == "vm_version" && n.Kind == yaml.ScalarNode {
		return "s:" + n.Value
	}
	b, err := json.Marshal(r.generic(n, nil))
	if err != nil {
		return "raw:" + n.Value
	}
	return string(b)
}

// written renders a value node as written: the scalar spelling, or a
// compact flow rendering of a collection.
func written(n *yaml.Node) string {
	if n == nil {
		return ""
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode {
		return n.Value
	}
	c := *n
	c.Style = yaml.FlowStyle
	c.Anchor = ""
	b, err := yaml.Marshal(&c)
	if err != nil {
		return ""
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

func joinAnd(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}
