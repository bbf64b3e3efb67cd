package inventory

import (
	"fmt"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"barn.dev/lib/inventory/yaml11"
)

// group is one Ansible group, merged over every place it is defined (in
// every inventory file).
type group struct {
	Name     string
	Node     *yaml.Node // key of its first definition
	src      *reader    // file of Node
	Parents  map[string]bool
	Children []string
	Vars     map[string][]varDef // inline vars in parse order: a group defined twice may set a key twice
	Depth    int                 // longest path from all, as Ansible computes it
	Priority int64               // ansible_group_priority set in the inventory; 1 when unset
	priority []varDef            // where ansible_group_priority was set, in parse order
}

// varDef is one definition of a variable.
type varDef struct {
	Key     string
	KeyNode *yaml.Node
	Value   *yaml.Node // alias-resolved
	src     *reader    // the file it is written in
	Origin  string     // group name, or for host vars the group whose hosts: listed it
}

// file is the name of the file a definition is written in.
func (d varDef) file() string { return d.src.file }

// host is one host key (after range expansion), merged over every group
// that lists it.
type host struct {
	Name   string
	Node   *yaml.Node // key of its first listing
	src    *reader
	Groups []string // groups that list it directly, in parse order
	Vars   map[string][]varDef
	Order  int
}

// model is the parsed inventory structure of every inventory file.
type model struct {
	Groups    map[string]*group
	Hosts     map[string]*host
	HostOrder []string
	Warnings  []warning
}

type warning struct {
	File    string
	Node    *yaml.Node
	Code    string
	Message string
}

func (m *model) warn(r *reader, n *yaml.Node, code, msg string) {
	m.Warnings = append(m.Warnings, warning{r.file, n, code, msg})
}

// Ansible's implicit groups: every inventory has all, and ungrouped as
// all's child for hosts that no other group lists.
const (
	groupAll       = "all"
	groupUngrouped = "ungrouped"
)

func newModel() *model {
	m := &model{Groups: map[string]*group{}, Hosts: map[string]*host{}}
	m.group(groupAll, nil, nil)
	m.group(groupUngrouped, nil, nil).Parents[groupAll] = true
	m.Groups[groupAll].Children = []string{groupUngrouped}
	return m
}

// addFile parses one inventory file's root as Ansible's yaml inventory
// plugin does (plugins/inventory/yaml.py parse); false when that plugin
// would fail on it.
func (m *model) addFile(r *reader, root *yaml.Node) bool {
	root = r.deref(root)
	if root == nil {
		return false
	}
	if root.Kind != yaml.MappingNode {
		r.at(root, Problem{Message: "the inventory root must be a mapping with an all: group", Hint: "start the file with all:"})
		return false
	}
	entries := r.flatMap(root, nil)
	for _, e := range entries {
		if e.Key == "plugin" && !falsy(r, e.Value) {
			r.at(e.KeyNode, Problem{Key: "plugin", Message: "this is an inventory plugin configuration, not a YAML inventory; Barn cannot run Ansible's inventory plugins",
				Hint: "give Barn the YAML inventory the plugin reads or writes"})
			return false
		}
	}
	if m.Groups[groupAll].Node == nil {
		for _, e := range entries {
			if e.Key == groupAll {
				m.Groups[groupAll].Node, m.Groups[groupAll].src = e.KeyNode, r
			}
		}
	}
	for _, e := range entries {
		if !r.stringKey(e, "group name") {
			continue
		}
		v := r.deref(e.Value)
		if v != nil && !(v.Kind == yaml.MappingNode || isNull(v)) {
			m.warn(r, e.KeyNode, "not_a_group", fmt.Sprintf("%q is not a group definition (Ansible skips it)", e.Key))
			continue
		}
		m.parseGroup(r, e.Key, e.KeyNode, v, "")
	}
	return true
}

// finish applies Ansible's reconcile_inventory (an inventory without an
// all: key is read like Ansible reads it: its top-level groups become
// children of all) and computes depths and
// priorities, once every file is parsed.
func (m *model) finish(r *reader) {
	for _, name := range m.HostOrder {
		h := m.Hosts[name]
		other, inUngrouped := false, false
		for g := range m.ancestry(h) {
			other = other || (g != groupUngrouped && g != groupAll)
		}
		for _, g := range h.Groups {
			inUngrouped = inUngrouped || g == groupUngrouped
		}
		switch {
		case !other && !inUngrouped:
			h.Groups = append(h.Groups, groupUngrouped)
		case other && inUngrouped:
			// reconcile_inventory removes a host listed in ungrouped from
			// it once the host has any other group, an ancestor included
			// (ungrouped nested under another group), and with it the
			// ancestors no other group of the host has.
			var keep []string
			for _, g := range h.Groups {
				if g != groupUngrouped {
					keep = append(keep, g)
				}
			}
			h.Groups = keep
		}
	}
	r.depths(m)
	names := make([]string, 0, len(m.Groups))
	for n := range m.Groups {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		m.priorityOf(m.Groups[n])
	}
}

// ancestry is every group host h belongs to, directly or through a
// parent, all included.
func (m *model) ancestry(h *host) map[string]bool {
	seen := map[string]bool{}
	var walk func(n string, depth int)
	walk = func(n string, depth int) {
		if seen[n] || depth > maxGroupDepth+1 {
			return
		}
		seen[n] = true
		if g := m.Groups[n]; g != nil {
			for p := range g.Parents {
				walk(p, depth+1)
			}
		}
	}
	for _, n := range h.Groups {
		walk(n, 0)
	}
	return seen
}

// stringKey reports whether a group or host key is a string for Ansible
// (PyYAML resolves plain yes, 1 or ~ to other types, which Ansible
// refuses as names).
func (r *reader) stringKey(e entry, what string) bool {
	if e.KeyNode == nil || e.KeyNode.Kind != yaml.ScalarNode {
		return true
	}
	s := scalarOf(e.KeyNode)
	if s.Kind == yaml11.Str {
		return true
	}
	r.at(e.KeyNode, Problem{Value: e.Key, Message: fmt.Sprintf("YAML 1.1 (Ansible) reads the %s %s as %s; Ansible refuses it", what, e.Key, withArticle(s.Kind.String())),
		Hint: fmt.Sprintf("quote it: %q", e.Key)})
	return false
}

func (m *model) group(name string, key *yaml.Node, r *reader) *group {
	g := m.Groups[name]
	if g == nil {
		g = &group{Name: name, Node: key, src: r, Parents: map[string]bool{}, Vars: map[string][]varDef{}, Priority: 1}
		m.Groups[name] = g
	}
	if g.Node == nil && key != nil {
		g.Node, g.src = key, r
	}
	return g
}

// parseGroup follows Ansible's yaml inventory plugin (_parse_group): the
// sections of a group are processed in the order they are written.
func (m *model) parseGroup(r *reader, name string, key, value *yaml.Node, parent string) {
	if r.stop {
		return
	}
	if parent != "" && name == groupAll {
		r.at(key, Problem{Message: fmt.Sprintf("group all is listed as a child of %s (Ansible: a recursive dependency loop)", parent), Hint: "remove it from " + parent + ".children"})
		return
	}
	g := m.group(name, key, r)
	if parent != "" && !g.Parents[parent] {
		g.Parents[parent] = true
		pg := m.Groups[parent]
		pg.Children = append(pg.Children, name)
	}
	if value == nil || isNull(value) {
		return
	}
	for _, e := range r.flatMap(value, nil) {
		sec := r.deref(e.Value)
		if sec == nil || isNull(sec) {
			continue
		}
		switch e.Key {
		case "vars", "hosts", "children":
		default:
			m.warn(r, e.KeyNode, "unexpected_group_key",
				fmt.Sprintf("group %s: key %q ignored; only vars, children and hosts are valid (Ansible skips it too)", name, e.Key))
			continue
		}
		switch {
		case sec.Kind == yaml.ScalarNode && scalarOf(sec).Kind == yaml11.Str:
			// Ansible turns `hosts: 10.10.10.10` into {10.10.10.10: null}.
			// Ansible turns `vars: x` into {x: null} alike.
			null := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: sec.Line, Column: sec.Column}
			m.section(r, g, e.Key, []entry{{Key: sec.Value, KeyNode: sec, Value: null}})
		case sec.Kind != yaml.MappingNode:
			r.at(sec, Problem{Key: e.Key, Message: fmt.Sprintf("the %s of group %s must be a mapping", e.Key, name)})
		default:
			m.section(r, g, e.Key, r.flatMap(sec, nil))
		}
	}
}

func (m *model) section(r *reader, g *group, kind string, entries []entry) {
	switch kind {
	case "vars":
		for _, e := range entries {
			r.checkVMKey(e, "", g.Name)
			d := varDef{Key: e.Key, KeyNode: e.KeyNode, Value: r.deref(e.Value), src: r, Origin: g.Name}
			if e.Key == "ansible_group_priority" {
				g.priority = append(g.priority, d) // Group.set_variable keeps it out of the vars
				continue
			}
			g.Vars[e.Key] = append(g.Vars[e.Key], d)
		}
	case "children":
		for _, e := range entries {
			if !r.stringKey(e, "group name") {
				continue
			}
			v := r.deref(e.Value)
			if v != nil && !(v.Kind == yaml.MappingNode || isNull(v)) {
				r.at(e.KeyNode, Problem{Value: written(v), Message: fmt.Sprintf("child %q of group %s is not a group definition (Ansible fails on it)", e.Key, g.Name),
					Hint: "write " + e.Key + ": {} or give it hosts, vars or children"})
				continue
			}
			m.parseGroup(r, e.Key, e.KeyNode, v, g.Name)
		}
	case "hosts":
		for _, e := range entries {
			m.hostEntry(r, g, e)
		}
	}
}

// hostEntry reads one entry e of group g's hosts: a host pattern, each
// host it expands to joining g, with its variables (which go to a group of
// the same name when there is one, as in Ansible).
func (m *model) hostEntry(r *reader, g *group, e entry) {
	if !r.stringKey(e, "host") {
		return
	}
	names, port, err := expandHostPattern(e.Key)
	if err == nil && len(names) == 0 {
		err = fmt.Errorf("expands to no host at all (Ansible: an empty range, silently)")
	}
	if err != nil {
		r.at(e.KeyNode, Problem{Host: e.Key, Message: err.Error(), Hint: "write [first:last] with numbers, e.g. 10.10.10.[11:13]"})
		return
	}
	if port != "" { // refused, and read on as Ansible reads it
		r.at(e.KeyNode, Problem{Host: e.Key, Message: fmt.Sprintf("ends in the port :%s; Ansible reads it as %s with ansible_port %s, and Barn's nodes take SSH on port 22", port, strings.Join(names, ", "), port),
			Hint: "remove :" + port})
	}
	var vars []entry
	if v := r.deref(e.Value); v != nil && !falsy(r, v) {
		// Ansible reads `host: <falsy>` as no vars (`or {}`).
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
			h = &host{Name: n, Node: e.KeyNode, src: r, Vars: map[string][]varDef{}, Order: len(m.HostOrder)}
			m.Hosts[n] = h
			m.HostOrder = append(m.HostOrder, n)
		}
		h.Groups = append(h.Groups, g.Name)
		target := h.Vars
		if same := m.Groups[n]; same != nil && len(vars) > 0 {
			// InventoryData.set_variable looks the name up among
			// the groups first: the variables go to that group.
			m.warn(r, e.KeyNode, "host_vars_to_group", fmt.Sprintf("the variables of host %s go to the group %s, as Ansible's set_variable finds a group of that name first", n, n))
			target = same.Vars
		}
		for _, e2 := range vars {
			target[e2.Key] = append(target[e2.Key], varDef{Key: e2.Key, KeyNode: e2.KeyNode, Value: r.deref(e2.Value), src: r, Origin: g.Name})
		}
	}
}

// falsy reports whether Python would find the value false: null, false,
// 0, 0.0, "" and empty collections.
func falsy(r *reader, n *yaml.Node) bool {
	n = r.deref(n)
	if n == nil {
		return true
	}
	switch n.Kind {
	case yaml.MappingNode:
		return len(r.flatMap(n, nil)) == 0
	case yaml.SequenceNode:
		return len(n.Content) == 0
	case yaml.ScalarNode:
		s := scalarOf(n)
		switch s.Kind {
		case yaml11.Null:
			return true
		case yaml11.Bool:
			return !s.Bool
		case yaml11.Int:
			return s.Int == 0 && !s.IntOverflow
		case yaml11.Float:
			return s.Float == 0
		case yaml11.Str:
			return s.Spelling == ""
		}
	}
	return false
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

// priorityOf sets g.Priority from its ansible_group_priority definitions
// as Group.set_variable does (int(value); the last one parsed wins, with a
// warning when they differ). A spelling Barn refuses still counts with
// Ansible's reading, so every tie Barn states is Ansible's.
func (m *model) priorityOf(g *group) {
	var first *varDef
	for i, d := range g.priority {
		p, ok := ansibleInt(d.src, d.Value)
		d.src.val("", &setting{Key: d.Key, Value: d.Value, Origin: g.Name, src: d.src}).priority(d.Value, p, ok)
		if !ok {
			continue
		}
		if first != nil && p != g.Priority {
			m.warn(d.src, d.Value, "priority_redefined", fmt.Sprintf("group %s sets ansible_group_priority to %d at %s:%d and to %d at %s:%d; Ansible uses the one it parses last, %d",
				g.Name, g.Priority, first.file(), line(*first), p, d.file(), line(d), p))
		}
		if first == nil {
			first = &g.priority[i]
		}
		g.Priority = p
	}
}

// depths computes each group's depth as Ansible does: the longest path
// from all. Cycles and nesting deeper than 64 are problems.
func (r *reader) depths(m *model) {
	// Every group without a parent is a child of all (reconcile_inventory).
	names := make([]string, 0, len(m.Groups))
	for n := range m.Groups {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		g := m.Groups[n]
		if n != groupAll && len(g.Parents) == 0 {
			g.Parents[groupAll] = true
			m.Groups[groupAll].Children = append(m.Groups[groupAll].Children, n)
		}
	}
	state := map[string]int{} // 0 new, 1 visiting, 2 done
	var visit func(n string, stack []string) int
	visit = func(n string, stack []string) int {
		g := m.Groups[n]
		switch state[n] {
		case 1:
			g.src.at(g.Node, Problem{Message: fmt.Sprintf("group cycle: %s", strings.Join(append(stack, n), " → ")), Hint: "a group may not be its own descendant"})
			return 0
		case 2:
			return g.Depth
		}
		if n == groupAll {
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
			g.src.at(g.Node, Problem{Message: fmt.Sprintf("group %s is nested deeper than %d levels", n, maxGroupDepth)})
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
// descendant), without all, in Ansible's sort_groups order: by depth, then
// priority, then name.
func (m *model) hostGroups(h *host) []*group {
	seen := m.ancestry(h)
	out := make([]*group, 0, len(seen))
	for n := range seen {
		if g := m.Groups[n]; g != nil && n != groupAll {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return groupLess(out[i], out[j]) })
	return out
}

// groupLess is Ansible's sort_groups key (inventory/helpers.py):
// (depth, priority, name); later groups win.
func groupLess(a, b *group) bool {
	if a.Depth != b.Depth {
		return a.Depth < b.Depth
	}
	if a.Priority != b.Priority {
		return a.Priority < b.Priority
	}
	return a.Name < b.Name
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 &&
		(n.ShortTag() == "!!null")
}
