package inventory

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// BesideDirs returns in once for each directory whose host_vars/ Ansible
// also reads for a run: in itself (the inventory's directory), then in
// with its vars read from each of dirs instead — a playbook's directory
// (ansible-playbook reads host_vars/ and group_vars/ beside the playbook)
// or the working directory (ad-hoc ansible reads them there) — skipping
// directories that are the inventory's or repeat. Each is for
// ConnectionOverrides; problems name the files under that directory.
func BesideDirs(in *Input, dirs []string) []*Input {
	out := []*Input{in}
	seen := map[string]bool{}
	if in.Vars != nil {
		seen[absDir(in.VarsPath)] = true
	}
	for _, d := range dirs {
		a := absDir(d)
		if seen[a] {
			continue
		}
		seen[a] = true
		c := *in
		c.Vars, c.VarsPath = os.DirFS(d), d
		out = append(out, &c)
	}
	return out
}

// absDir is d made absolute and clean ("" is the working directory).
func absDir(d string) string {
	if d == "" {
		d = "."
	}
	if a, err := filepath.Abs(d); err == nil {
		return a
	}
	return filepath.Clean(d)
}

// ConnectionOverrides returns, for each of hosts (inventory host keys),
// every definition of one of keys that Ansible would rank above a host
// entry of a second inventory named after in (`ansible -i INVENTORY -i
// EXPORT`): the host_vars/ files beside the inventory (the host_plugins
// step of the precedence Barn resolves by, which comes after every
// inventory source's host entries). Those are the only inventory-visible
// definitions an export of host variables cannot win over; every other
// level — all.vars, group vars, group_vars/ files, the inventory's own
// host entries — loses to the export's host entries.
//
// Each override is a Problem at the definition (File, Line, Column, Host,
// Key, Value as written, Origin "host_vars"), in host order, then by file and line. Hosts the inventory does
// not list are skipped. An inventory Barn cannot read (a parse error, a
// vars file Ansible would fail on, an invalid Barn variable) is the usage
// error ResolveInput would return: an unread file is never taken as one
// without overrides.
func ConnectionOverrides(in *Input, hosts, keys []string) ([]Problem, error) {
	a := &analysis{}
	if !a.load(in) {
		return nil, errorOf(a.r.probs.sorted(), in.Name)
	}
	var out []Problem
	for _, name := range hosts {
		h := a.m.Hosts[name]
		if h == nil {
			continue
		}
		groups := a.m.hostGroups(h)
		first := len(out)
		for _, key := range keys {
			for _, c := range a.candidates(h, groups, key) {
				if l := precedence[c.layer]; l.Scope != scopeHost || !l.Files {
					continue
				}
				p := Problem{File: c.def.file(), Line: line(c.def), Host: name, Key: key, Value: written(c.def.Value), Origin: c.origin(),
					Message: fmt.Sprintf("host_vars/ outranks every inventory's host entries, so Ansible would connect with this %s, not Barn's", key),
					Hint:    fmt.Sprintf("delete %s from %s, or set it in a group_vars/ file or a group of the inventory (Barn's export wins over both)", key, c.def.file())}
				if c.def.Value != nil {
					p.Column = c.def.Value.Column
				}
				out = append(out, p)
			}
		}
		mine := out[first:]
		sort.SliceStable(mine, func(i, j int) bool {
			return mine[i].File < mine[j].File || mine[i].File == mine[j].File && mine[i].Line < mine[j].Line
		})
	}
	if !a.r.probs.empty() {
		return nil, errorOf(a.r.probs.sorted(), in.Name)
	}
	return out, nil
}
