package inventory

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"barn.dev/lib/inventory/yaml11"
)

// setting is the winning definition of one variable for one host.
type setting struct {
	Key     string
	KeyNode *yaml.Node
	Value   *yaml.Node
	Origin  string // "host", "all" or a group name
	Depth   int    // hostDepth for host vars
}

const hostDepth = 1 << 20

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

// lookup returns the setting of key for h, or nil when no level defines it.
// Conflicting definitions at the winning depth are problems (and nil).
func (r *reader) lookup(m *model, h *host, groups []*group, key string) *setting {
	if defs := h.Vars[key]; len(defs) > 0 {
		if !r.agree(key, defs) {
			var origins []string
			for _, d := range defs {
				origins = append(origins, d.Origin)
			}
			d := defs[len(defs)-1]
			r.at(d.Value, Problem{Host: h.Name, Key: key, Value: written(d.Value), Origin: "host entries under groups " + joinAnd(uniq(origins)),
				Message: "the host is listed with different values", Hint: "give the value once, in one host entry"})
			return nil
		}
		d := defs[0]
		return &setting{Key: key, KeyNode: d.KeyNode, Value: d.Value, Origin: "host", Depth: hostDepth}
	}
	best := -1
	var at []*group
	for _, g := range groups {
		defs := g.Vars[key]
		if len(defs) == 0 {
			continue
		}
		switch {
		case g.Depth > best:
			best, at = g.Depth, []*group{g}
		case g.Depth == best:
			at = append(at, g)
		}
	}
	if len(at) == 0 {
		return nil
	}
	var defs []varDef
	for _, g := range at {
		gdefs := g.Vars[key]
		if !r.agree(key, gdefs) {
			d := gdefs[len(gdefs)-1]
			r.at(d.Value, Problem{Host: h.Name, Key: key, Value: written(d.Value), Origin: g.Name,
				Message: fmt.Sprintf("group %s defines it more than once with different values", g.Name), Hint: "keep one definition"})
			return nil
		}
		defs = append(defs, gdefs[0])
	}
	if !r.agree(key, defs) {
		names := make([]string, len(at))
		var vals []string
		for i, g := range at {
			names[i] = g.Name
			vals = append(vals, fmt.Sprintf("%s: %q", g.Name, written(g.Vars[key][0].Value)))
		}
		d := defs[0]
		r.at(d.Value, Problem{Host: h.Name, Key: key, Value: written(d.Value), Origin: joinAnd(names),
			Message: fmt.Sprintf("inherits conflicting values from groups %s at the same depth (%s)", joinAnd(names), strings.Join(vals, ", ")),
			Hint:    "set it on the host"})
		return nil
	}
	d := defs[0]
	origin := d.Origin
	return &setting{Key: key, KeyNode: d.KeyNode, Value: d.Value, Origin: origin, Depth: best}
}

func (r *reader) agree(key string, defs []varDef) bool {
	if len(defs) < 2 {
		return true
	}
	first := r.fingerprint(key, defs[0].Value)
	for _, d := range defs[1:] {
		if r.fingerprint(key, d.Value) != first {
			return false
		}
	}
	return true
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

func uniq(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	sort.Strings(out)
	return out
}
