package inventory

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// layer is one step of Ansible's variable precedence for a host's
// inventory variables, lowest first: ansible-core's default
// VARIABLE_PRECEDENCE (config/base.yml), then host vars and host_vars
// files (vars/manager.py get_vars). Within a layer, entities merge in
// order (the groups in sort_groups order; files in find_vars_files order;
// inline definitions in parse order) and the last definition wins
// (combine_vars, hash_behaviour replace).
type layer struct {
	Name  string // Ansible's name: a VARIABLE_PRECEDENCE entry, or host / host_plugins for the two host steps
	Scope scope
	Files bool // from group_vars/ or host_vars/ files (the host_group_vars vars plugin), not the inventory file
	// Play marks the steps that read group_vars/ beside the playbook.
	// Pigsty's playbooks live in the inventory's directory, so they read
	// the same files as the inventory step right before them, and merging
	// the same values twice changes nothing: Barn skips them.
	Play bool
}

type scope int

const (
	scopeAll    scope = iota // the group all
	scopeGroups              // every other group of the host, in sort_groups order
	scopeHost                // the host itself
)

// precedence is the order Barn resolves every consumed variable in.
var precedence = []layer{
	{Name: "all_inventory", Scope: scopeAll},                      // all.vars in the inventory
	{Name: "groups_inventory", Scope: scopeGroups},                // <group>.vars in the inventory
	{Name: "all_plugins_inventory", Scope: scopeAll, Files: true}, // group_vars/all beside the inventory
	{Name: "all_plugins_play", Scope: scopeAll, Files: true, Play: true},
	{Name: "groups_plugins_inventory", Scope: scopeGroups, Files: true}, // group_vars/<group> beside the inventory
	{Name: "groups_plugins_play", Scope: scopeGroups, Files: true, Play: true},
	{Name: "host", Scope: scopeHost},                      // the host's entries in the inventory
	{Name: "host_plugins", Scope: scopeHost, Files: true}, // host_vars/<host> beside the inventory
}

// candidate is one definition of a variable for one host, in the place
// precedence gives it.
type candidate struct {
	layer int
	group *group // the group for the all and groups scopes
	def   varDef
	// within counts the entity's definitions in this layer: several for a
	// host listed twice, a group defined twice or a vars directory.
	within int
}

// origin names where a candidate was written: "host", "host_vars", "all",
// "group_vars/all", a group name, or "group_vars/<group>".
func (c candidate) origin() string {
	l := precedence[c.layer]
	switch {
	case l.Scope == scopeHost && l.Files:
		return "host_vars"
	case l.Scope == scopeHost:
		return "host"
	case l.Files:
		return "group_vars/" + c.group.Name
	}
	return c.group.Name
}

// describe is a candidate for messages: `group pg-test at pigsty.yml:12`.
func (c candidate) describe() string {
	l := precedence[c.layer]
	where := fmt.Sprintf("%s:%d", c.def.file(), line(c.def))
	switch {
	case l.Scope == scopeHost && l.Files:
		return where
	case l.Scope == scopeHost:
		return fmt.Sprintf("the host's entry under %s at %s", c.def.Origin, where)
	case c.group.Name == groupAll && !l.Files:
		return "all.vars at " + where
	}
	return fmt.Sprintf("group %s at %s", c.group.Name, where)
}

func line(d varDef) int {
	if d.Value != nil {
		return d.Value.Line
	}
	if d.KeyNode != nil {
		return d.KeyNode.Line
	}
	return 0
}

// setting is the definition Ansible uses for one variable of one host.
type setting struct {
	Key     string
	KeyNode *yaml.Node
	Value   *yaml.Node
	Origin  string // see candidate.origin
	src     *reader
}

func (c candidate) setting() *setting {
	return &setting{Key: c.def.Key, KeyNode: c.def.KeyNode, Value: c.def.Value, Origin: c.origin(), src: c.def.src}
}

// candidates lists every definition of key for host h (whose groups are
// groups, in sort_groups order) in precedence order: the last one is
// Ansible's value.
func (a *analysis) candidates(h *host, groups []*group, key string) []candidate {
	var out []candidate
	add := func(li int, g *group, defs []varDef) {
		for _, d := range defs {
			out = append(out, candidate{layer: li, group: g, def: d, within: len(defs)})
		}
	}
	for li, l := range precedence {
		if l.Play {
			continue
		}
		switch l.Scope {
		case scopeAll, scopeGroups:
			entities := groups
			if l.Scope == scopeAll {
				entities = []*group{a.m.Groups[groupAll]}
			}
			for _, g := range entities {
				if l.Files {
					add(li, g, a.fileDefs("group_vars", g.Name, key))
				} else {
					add(li, g, g.Vars[key])
				}
			}
		case scopeHost:
			if l.Files {
				add(li, nil, a.fileDefs("host_vars", h.Name, key))
			} else {
				add(li, nil, h.Vars[key])
			}
		}
	}
	return out
}

// resolution is the outcome of one variable of one host: Ansible's pick
// (nil when nothing defines it) and, when that pick rests on an order
// Barn will not guess at, the problem saying so.
type resolution struct {
	pick      *candidate
	all       []candidate
	ambiguity *Problem
}

// resolve resolves key for host h exactly as Ansible does, and flags
// genuine ambiguity inside Barn's namespace:
//   - sibling groups at the winning group's depth and priority that set a
//     different value, where Ansible's pick rests only on group-name order;
//   - the winning host listed more than once in the inventory with
//     different values (Ansible keeps the entry it parses last);
//   - the winning group defined more than once with different values
//     (likewise).
func (a *analysis) resolve(h *host, groups []*group, key string) resolution {
	all := a.candidates(h, groups, key)
	if len(all) == 0 {
		return resolution{}
	}
	pick := all[len(all)-1]
	res := resolution{pick: &pick, all: all}
	l := precedence[pick.layer]
	want := pick.def.src.fingerprint(key, pick.def.Value)
	// Siblings: the last definition of every other group with the winner's
	// (depth, priority) in the winning layer.
	if l.Scope == scopeGroups {
		var tied []candidate
		last := map[*group]candidate{}
		for _, c := range all {
			if c.layer == pick.layer && c.group != pick.group && c.group.Depth == pick.group.Depth && c.group.Priority == pick.group.Priority {
				if _, seen := last[c.group]; !seen {
					tied = append(tied, c)
				}
				last[c.group] = c
			}
		}
		differ := false
		for i, c := range tied {
			tied[i] = last[c.group]
			differ = differ || tied[i].def.src.fingerprint(key, tied[i].def.Value) != want
		}
		if differ {
			res.ambiguity = a.siblingProblem(h, key, pick, tied)
			return res
		}
	}
	// Repeated entries of the winning host or group.
	if !l.Files && pick.within > 1 {
		var same []candidate
		for _, c := range all {
			if c.layer == pick.layer && c.group == pick.group {
				same = append(same, c)
			}
		}
		for _, c := range same {
			if c.def.src.fingerprint(key, c.def.Value) != want {
				res.ambiguity = a.repeatProblem(h, key, pick, same)
				return res
			}
		}
	}
	return res
}

// siblingProblem: groups tied on (depth, priority) disagree.
func (a *analysis) siblingProblem(h *host, key string, pick candidate, tied []candidate) *Problem {
	all := append(append([]candidate{}, tied...), pick)
	names := make([]string, len(all))
	var sets []string
	for i, c := range all {
		names[i] = c.group.Name
		sets = append(sets, fmt.Sprintf("%s sets %s", c.describe(), quoteValue(c.def.Value)))
	}
	where := "the inventory"
	if precedence[pick.layer].Files {
		where = "group_vars"
	}
	p := &Problem{Host: h.Name, Key: key, Value: written(pick.def.Value), Origin: pick.origin(),
		Message: fmt.Sprintf("groups %s (all at depth %d, priority %d) set different values in %s: %s; Ansible picks %s from %s only because %s sorts last by name",
			joinAnd(names), pick.group.Depth, pick.group.Priority, where, strings.Join(sets, ", "), quoteValue(pick.def.Value), pick.group.Name, pick.group.Name),
		Hint: "set ansible_group_priority on one of these groups in the inventory, or set " + key + " on the host"}
	p.Ansible = a.pickOf(pick, "the last of groups tied on depth and priority, by name")
	return p
}

// repeatProblem: a host listed twice, or a group defined twice, with
// different values.
func (a *analysis) repeatProblem(h *host, key string, pick candidate, same []candidate) *Problem {
	var sets []string
	for _, c := range same {
		under := ""
		if precedence[pick.layer].Scope == scopeHost {
			under = "under " + c.def.Origin + " "
		}
		sets = append(sets, fmt.Sprintf("%s%s at %s:%d", under, quoteValue(c.def.Value), c.def.file(), line(c.def)))
	}
	what, hint := fmt.Sprintf("the host is listed %d times with different values", len(same)), "give the value once, in one host entry or in host_vars/"+h.Name+".yml"
	if precedence[pick.layer].Scope != scopeHost {
		what, hint = fmt.Sprintf("group %s is defined %d times with different values", pick.group.Name, len(same)), "keep one definition of the group's "+key
	}
	if precedence[pick.layer].Scope == scopeAll {
		what = fmt.Sprintf("all.vars is given %d times with different values", len(same))
	}
	p := &Problem{Host: h.Name, Key: key, Value: written(pick.def.Value), Origin: pick.origin(),
		Message: fmt.Sprintf("%s (%s); Ansible uses the one it parses last, %s at %s:%d", what, strings.Join(sets, ", "), quoteValue(pick.def.Value), pick.def.file(), line(pick.def)),
		Hint:    hint}
	p.Ansible = a.pickOf(pick, "the definition parsed last")
	return p
}

func (a *analysis) pickOf(c candidate, why string) *Pick {
	return &Pick{Value: c.def.src.generic(c.def.Value, nil), Written: written(c.def.Value), File: c.def.file(), Line: line(c.def), Origin: c.origin(), Why: why}
}

func quoteValue(n *yaml.Node) string { return fmt.Sprintf("%q", written(n)) }

// fileDefs returns the definitions of key in the vars files of entity
// name under sub, in the order Ansible merges them.
func (a *analysis) fileDefs(sub, name, key string) []varDef {
	var out []varDef
	for _, vf := range a.varsOf(sub, name) {
		if d, ok := vf.vars[key]; ok {
			out = append(out, d)
		}
	}
	return out
}

// parsedVars is one vars file, read and parsed once.
type parsedVars struct {
	path string
	vars map[string]varDef
}

// varsOf returns the parsed vars files of one entity.
func (a *analysis) varsOf(sub, name string) []*parsedVars {
	key := sub + "/" + name
	if got, ok := a.vars[key]; ok {
		return got
	}
	var out []*parsedVars
	for _, vf := range a.finder.find(sub, name) {
		pv := a.parsed[vf.Path]
		if pv == nil {
			pv = a.parseVars(vf, sub, name)
			a.parsed[vf.Path] = pv
			a.read = append(a.read, vf.Path)
		}
		out = append(out, pv)
	}
	a.vars[key] = out
	return out
}

// parseVars reads one vars file as the host_group_vars plugin does: a
// mapping of variables; an empty (or otherwise false) document adds
// nothing; anything else is an error for Ansible too.
func (a *analysis) parseVars(vf varsFile, sub, name string) *parsedVars {
	r := a.r.sibling(vf.Path)
	pv := &parsedVars{path: vf.Path, vars: map[string]varDef{}}
	if strings.HasPrefix(string(vf.Data), "$ANSIBLE_VAULT;") {
		r.fileProblem("the file is encrypted with Ansible Vault; Barn cannot read it (and ansible-inventory needs the vault password)",
			"keep Barn's variables in a file that is not encrypted")
		return pv
	}
	root, ok := r.parseData(vf.Data)
	if !ok || root == nil || falsy(r, root) {
		return pv
	}
	if r.deref(root).Kind != yaml.MappingNode {
		r.at(root, Problem{Message: "a vars file must hold a mapping of variables (Ansible fails on it too)", Hint: "write key: value lines"})
		return pv
	}
	origin := sub + "/" + name
	for _, e := range r.flatMap(root, nil) {
		host := ""
		if sub == "host_vars" {
			host = name
		}
		r.checkVMKey(e, host, origin)
		if e.Key == "ansible_group_priority" && sub == "group_vars" {
			a.warnf(e.KeyNode, "priority_in_group_vars", "%s:%d: ansible_group_priority has no effect in a group_vars file; Ansible honours it only in the inventory", vf.Path, e.KeyNode.Line)
		}
		pv.vars[e.Key] = varDef{Key: e.Key, KeyNode: e.KeyNode, Value: r.deref(e.Value), src: r, Origin: name}
	}
	return pv
}
