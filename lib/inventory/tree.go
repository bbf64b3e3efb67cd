package inventory

import (
	"fmt"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// group is one Ansible group, merged over every place it is defined.
type group struct {
	Name     string
	Node     *yaml.Node // key of its first definition
	Parents  map[string]bool
	Children []string
	Vars     map[string][]varDef // a group defined twice may set a key twice
	Depth    int
}

// varDef is one definition of a variable.
type varDef struct {
	Key     string
	KeyNode *yaml.Node
	Value   *yaml.Node // alias-resolved
	Origin  string     // group name, "all", or for host vars the group whose hosts: listed it
}

// host is one host key (after range expansion), merged over every group
// that lists it.
type host struct {
	Name   string
	Node   *yaml.Node // key of its first listing
	Groups []string   // groups that list it directly, in file order
	Vars   map[string][]varDef
	Order  int
}

// model is the parsed inventory structure.
type model struct {
	Groups    map[string]*group
	Hosts     map[string]*host
	HostOrder []string
	Warnings  []warning
}

type warning struct {
	Node    *yaml.Node
	Code    string
	Message string
}

func (r *reader) buildModel(root *yaml.Node) *model {
	m := &model{Groups: map[string]*group{}, Hosts: map[string]*host{}}
	m.group("all", root)
	root = r.deref(root)
	if root == nil {
		return m
	}
	if root.Kind != yaml.MappingNode {
		r.at(root, Problem{Message: "the inventory root must be a mapping with an all: group", Hint: "start the file with all:"})
		return m
	}
	entries := r.flatMap(root, nil)
	hasAll := false
	for _, e := range entries {
		if e.Key == "all" {
			hasAll = true
		}
	}
	if !hasAll {
		r.at(root, Problem{Message: "the inventory has no all: group", Hint: "put the groups under all: children:"})
	}
	m.group("all", root)
	for _, e := range entries {
		m.parseGroup(r, e.Key, e.KeyNode, e.Value, "")
	}
	r.depths(m)
	return m
}

func (m *model) group(name string, key *yaml.Node) *group {
	g := m.Groups[name]
	if g == nil {
		g = &group{Name: name, Node: key, Parents: map[string]bool{}, Vars: map[string][]varDef{}}
		m.Groups[name] = g
	}
	return g
}

// parseGroup follows Ansible's yaml inventory plugin (_parse_group).
func (m *model) parseGroup(r *reader, name string, key, value *yaml.Node, parent string) {
	if r.stop {
		return
	}
	value = r.deref(value)
	if value != nil && !(value.Kind == yaml.MappingNode || isNull(value)) {
		m.Warnings = append(m.Warnings, warning{key, "not_a_group", fmt.Sprintf("%q is not a group definition (Ansible skips it)", name)})
		return
	}
	g := m.group(name, key)
	if parent != "" && name != "all" {
		if !g.Parents[parent] {
			g.Parents[parent] = true
			pg := m.Groups[parent]
			pg.Children = append(pg.Children, name)
		}
	}
	if value == nil || isNull(value) {
		return
	}
	for _, e := range r.flatMap(value, nil) {
		sec := r.deref(e.Value)
		if sec == nil || isNull(sec) {
			continue
		}
		if sec.Kind == yaml.ScalarNode && (e.Key == "hosts" || e.Key == "children") {
			// Ansible turns `hosts: 10.10.10.10` into {10.10.10.10: null}.
			m.section(r, g, e.Key, []entry{{Key: sec.Value, KeyNode: sec, Value: nil}})
			continue
		}
		switch e.Key {
		case "vars", "hosts", "children":
			if sec.Kind != yaml.MappingNode {
				r.at(sec, Problem{Key: e.Key, Message: fmt.Sprintf("the %s of group %s must be a mapping", e.Key, name), Origin: ""})
				continue
			}
			m.section(r, g, e.Key, r.flatMap(sec, nil))
		default:
			m.Warnings = append(m.Warnings, warning{e.KeyNode, "unexpected_group_key",
				fmt.Sprintf("group %s: key %q ignored; only vars, children and hosts are valid (Ansible skips it too)", name, e.Key)})
		}
	}
}

func (m *model) section(r *reader, g *group, kind string, entries []entry) {
	switch kind {
	case "vars":
		for _, e := range entries {
			r.checkVMKey(e, "", g.Name)
			g.Vars[e.Key] = append(g.Vars[e.Key], varDef{Key: e.Key, KeyNode: e.KeyNode, Value: r.deref(e.Value), Origin: g.Name})
		}
	case "children":
		for _, e := range entries {
			m.parseGroup(r, e.Key, e.KeyNode, e.Value, g.Name)
		}
	case "hosts":
		for _, e := range entries {
			names, err := expandHostPattern(e.Key)
			if err != nil {
				r.at(e.KeyNode, Problem{Host: e.Key, Message: err.Error(), Hint: "write [first:last] with numbers, e.g. 10.10.10.[11:13]"})
				continue
			}
			var vars []entry
			if v := r.deref(e.Value); v != nil && !isNull(v) {
				if v.Kind != yaml.MappingNode {
					r.at(v, Problem{Host: e.Key, Message: "host variables must be a mapping", Hint: "write " + e.Key + ": { key: value }"})
				} else {
					vars = r.flatMap(v, nil)
				}
			}
			for _, e2 := range vars {
				r.checkVMKey(e2, e.Key, "host")
			}
			for _, n := range names {
				h := m.Hosts[n]
				if h == nil {
					h = &host{Name: n, Node: e.KeyNode, Vars: map[string][]varDef{}, Order: len(m.HostOrder)}
					m.Hosts[n] = h
					m.HostOrder = append(m.HostOrder, n)
				}
				h.Groups = append(h.Groups, g.Name)
				for _, e2 := range vars {
					h.Vars[e2.Key] = append(h.Vars[e2.Key], varDef{Key: e2.Key, KeyNode: e2.KeyNode, Value: r.deref(e2.Value), Origin: g.Name})
				}
			}
		}
	}
}

// checkVMKey refuses unknown vm_* keys with a suggestion, naming the host
// (for host vars) and where the key was written (a group name or "host").
func (r *reader) checkVMKey(e entry, host, origin string) {
	if !strings.HasPrefix(e.Key, "vm_") {
		return
	}
	for _, k := range VMKeys {
		if k == e.Key {
			return
		}
	}
	p := Problem{Host: host, Key: e.Key, Value: written(e.Value), Origin: origin, Message: "unknown vm_* variable"}
	if s := suggest(e.Key, VMKeys); s != "" {
		p.Hint = "did you mean " + s
	} else {
		p.Hint = "Barn reads only " + strings.Join(VMKeys, ", ")
	}
	r.at(e.KeyNode, p)
}

// depths computes each group's depth as Ansible does: the longest path
// from all. Cycles and nesting deeper than 64 are problems.
func (r *reader) depths(m *model) {
	// Every group without a parent is a child of all (Ansible reconciles so).
	names := make([]string, 0, len(m.Groups))
	for n := range m.Groups {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		g := m.Groups[n]
		if n != "all" && len(g.Parents) == 0 {
			g.Parents["all"] = true
		}
	}
	state := map[string]int{} // 0 new, 1 visiting, 2 done
	var visit func(n string, stack []string) int
	visit = func(n string, stack []string) int {
		g := m.Groups[n]
		switch state[n] {
		case 1:
			r.at(g.Node, Problem{Message: fmt.Sprintf("group cycle: %s", strings.Join(append(stack, n), " → ")), Hint: "a group may not be its own descendant"})
			return 0
		case 2:
			return g.Depth
		}
		if n == "all" {
			state[n] = 2
			return 0
		}
		state[n] = 1
		d := 0
		parents := make([]string, 0, len(g.Parents))
		for p := range g.Parents {
			parents = append(parents, p)
		}
		sort.Strings(parents)
		for _, p := range parents {
			if pd := visit(p, append(stack, n)) + 1; pd > d {
				d = pd
			}
		}
		if d > maxGroupDepth {
			r.at(g.Node, Problem{Message: fmt.Sprintf("group %s is nested deeper than %d levels", n, maxGroupDepth)})
		}
		g.Depth = d
		state[n] = 2
		return d
	}
	for _, n := range names {
		visit(n, nil)
	}
}

// hostGroups returns every group host h belongs to (directly or as a
// descendant), including all, sorted by name.
func (m *model) hostGroups(h *host) []*group {
	seen := map[string]bool{"all": true}
	var walk func(n string, depth int)
	walk = func(n string, depth int) {
		if seen[n] || depth > maxGroupDepth+1 {
			return
		}
		seen[n] = true
		g := m.Groups[n]
		if g == nil {
			return
		}
		for p := range g.Parents {
			walk(p, depth+1)
		}
	}
	for _, n := range h.Groups {
		walk(n, 0)
	}
	out := make([]*group, 0, len(seen))
	for n := range seen {
		if g := m.Groups[n]; g != nil {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 &&
		(n.ShortTag() == "!!null")
}
