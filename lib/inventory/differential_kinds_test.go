package inventory

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
)

// The generators of issue 24, one per kind, each going where the
// precedence generator does not: hostile scalars and tags, anchors across
// groups, host ranges of every step form, inventory directories holding
// odd files, names that collide, and symlinked inventories. Each returns
// the files of one case (see writeTree) and the inventory path.

// kgen is the shared state of one generated case.
type kgen struct {
	r     *rand.Rand
	files map[string]string
}

func newKgen(seed uint64, salt uint64) *kgen {
	return &kgen{r: rand.New(rand.NewPCG(seed, seed*0x9e3779b97f4a7c15+salt)), files: map[string]string{}}
}

func (g *kgen) chance(p float64) bool { return g.r.Float64() < p }

func (g *kgen) pick(list []string) string { return list[g.r.IntN(len(list))] }

// hosts returns n distinct host addresses in 10.10.10.10-29.
func (g *kgen) hosts(n int) []string {
	seen := map[string]bool{}
	var out []string
	for len(out) < n {
		h := fmt.Sprintf("10.10.10.%d", 10+g.r.IntN(20))
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	return out
}

// consumed are spellings of consumed keys Barn reads or refuses, so that
// every case also checks the values Barn reads.
var consumed = [][2]string{{"vm_cpu", "2"}, {"vm_cpu", "4"}, {"vm_mem", "2048"}, {"nodename", "node-a"}, {"pg_cluster", "pg-test"}, {"pg_seq", "1"},
	{"vm_cpu", `!!int "4"`}, {"vm_cpu", `!!int " 4"`}, {"vm_cpu", "!!int 0o4"}, {"vm_cpu", "!!str 4"}, {"vm_cpu", "!!float 4"}, {"vm_mem", "!!int 2_048"},
	{"nodename", "!!str on"}, {"vm_skip", "!!bool off"}, {"vm_skip", `!!bool "NO"`}, {"nodename", "!unsafe node-b"}, {"vm_cpu", "!!int +3"}}

// hostile are opaque scalars and tagged values: some PyYAML constructs,
// some it cannot (dates out of range, explicit tags it cannot build),
// some ansible-inventory cannot print.
var hostile = []string{
	"2024-02-28", "2024-02-29", "2023-02-29", "2024-02-30", "2024-13-01", "0000-01-01", "2024-04-31",
	"2024-02-01 10:00:00", "2024-02-01 24:00:00", "2024-02-01T10:60:00", "2024-02-01T10:00:60", "2024-02-01T10:00:00Z",
	"2024-02-01T10:00:00+23:59", "2024-02-01T10:00:00+24:00", "2024-1-2 3:04:05", "'2024-02-30'", `"2024-13-01"`,
	`!!int "abc"`, "!!int 08", `!!int ""`, "!!int 1.5", `!!int " 12"`, "!!int 0o17", "!!int 0x1F", "!!int 1_000", "!!int 01:30", "!!int 1:30",
	"!!float abc", `!!float ""`, `!!float "1"`, "!!float 1e3", "!!float .5", "!!float 1:30.5",
	"!!bool maybe", "!!bool Y", `!!bool "TRUE"`, "!!bool off",
	"!!timestamp abc", "!!timestamp 2024-1-2", "!!timestamp 2024-02-30",
	"!!null x", "!!null [a]", "!!str 5", "!!str {a: 1}", "!!map x", "!!seq x", "!!seq {a: 1}",
	"!!omap [a: 1, b: 2]", "!!omap [a, b]", "!!pairs [a: 1]", "!!set {a: null}", "!!binary aGk=",
	`!unsafe "{{ x }}"`, "!unsafe [a, b]", "!custom x", "!!python/str x",
	"=", "[a, =]", "0b_", "0x_", "0_", "1:30", "0o17", "1_000", "~", "0b101", "+12", "012", "0x1f",
	"{2024-02-30: x}", "{? [a] : b}", "{=: 1}", "{1: a, b: c}",
}

// genScalars fills opaque variables (and some consumed ones) with hostile
// scalars and tags, in the inventory and in group_vars/ and host_vars/.
func genScalars(seed uint64) (map[string]string, string) {
	g := newKgen(seed, 1)
	hs := g.hosts(1 + g.r.IntN(3))
	type place struct{ vars []string }
	allVars, metaVars := []string{"pg_version: 17"}, []string{}
	hostVars := map[string][]string{}
	vfiles := map[string][]string{}
	for i, n := 0, 1+g.r.IntN(4); i < n; i++ {
		kv := fmt.Sprintf("pg_x%d: %s", i, g.pick(hostile))
		if g.chance(0.3) {
			c := consumed[g.r.IntN(len(consumed))]
			kv = c[0] + ": " + c[1]
		}
		switch g.r.IntN(6) {
		case 0:
			allVars = append(allVars, kv)
		case 1:
			metaVars = append(metaVars, kv)
		case 2:
			h := g.pick(hs)
			hostVars[h] = append(hostVars[h], kv)
		case 3:
			vfiles["group_vars/all.yml"] = append(vfiles["group_vars/all.yml"], kv)
		case 4:
			vfiles["group_vars/pg-meta.yml"] = append(vfiles["group_vars/pg-meta.yml"], kv)
		default:
			p := "host_vars/" + g.pick(hs) + ".yml"
			vfiles[p] = append(vfiles[p], kv)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "all:\n  vars: {%s}\n  children:\n    pg-meta:\n", strings.Join(uniqueKeys(allVars), ", "))
	if len(metaVars) > 0 {
		fmt.Fprintf(&b, "      vars: {%s}\n", strings.Join(uniqueKeys(metaVars), ", "))
	}
	b.WriteString("      hosts:\n")
	for _, h := range hs {
		fmt.Fprintf(&b, "        %s: {%s}\n", h, strings.Join(uniqueKeys(hostVars[h]), ", "))
	}
	g.files["pigsty.yml"] = b.String()
	for p, kvs := range vfiles {
		g.files[p] = strings.Join(uniqueKeys(kvs), "\n") + "\n"
	}
	return g.files, "pigsty.yml"
}

// uniqueKeys keeps the first "key: value" of each key (duplicate keys are
// a boundary of their own, not this generator's subject).
func uniqueKeys(kvs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, kv := range kvs {
		k, _, _ := strings.Cut(kv, ":")
		if !seen[k] {
			seen[k] = true
			out = append(out, kv)
		}
	}
	return out
}

// genAnchors writes anchors on group vars, host entries and scalars and
// uses them across groups: aliases, merge keys, an anchor name defined
// twice, an alias inside its own anchor, merges of non-mappings.
func genAnchors(seed uint64) (map[string]string, string) {
	g := newKgen(seed, 2)
	groups := []string{"pg-meta", "pg-test", "infra"}
	hs := g.hosts(2 + g.r.IntN(3))
	var anchors, maps []string // every anchor; anchors of mappings
	anchor := func(isMap bool) string {
		name := fmt.Sprintf("a%d", len(anchors))
		if len(anchors) > 0 && g.chance(0.03) {
			name = g.pick(anchors) // defined twice
		}
		anchors = append(anchors, name)
		if isMap {
			maps = append(maps, name)
		}
		return name
	}
	ref := func() string {
		if len(anchors) == 0 {
			return "2"
		}
		return "*" + g.pick(anchors)
	}
	mref := func() string { // mostly a mapping, as a merge needs
		if len(maps) == 0 || g.chance(0.1) {
			return ref()
		}
		return "*" + g.pick(maps)
	}
	var b strings.Builder
	b.WriteString("all:\n  children:\n")
	for _, gr := range groups {
		fmt.Fprintf(&b, "    %s:\n", gr)
		if g.chance(0.7) {
			fmt.Fprintf(&b, "      vars: &%s\n", anchor(true))
			if len(anchors) > 1 && g.chance(0.4) {
				switch g.r.IntN(12) {
				case 0:
					b.WriteString("        <<: 5\n")
				case 1:
					fmt.Fprintf(&b, "        <<: [%s, %s]\n", mref(), mref())
				default:
					fmt.Fprintf(&b, "        <<: %s\n", mref())
				}
			}
			fmt.Fprintf(&b, "        vm_cpu: &%s %d\n", anchor(false), 1+g.r.IntN(4))
			if g.chance(0.5) {
				fmt.Fprintf(&b, "        pg_list: &%s [1, %s]\n", anchor(false), map[bool]string{true: "*" + anchors[len(anchors)-1], false: "2"}[g.chance(0.04)])
			}
			if g.chance(0.4) {
				fmt.Fprintf(&b, "        vm_mem: %s\n", ref())
			}
		}
		fmt.Fprintf(&b, "      hosts:\n")
		for _, h := range hs {
			if g.chance(0.5) {
				continue
			}
			switch g.r.IntN(4) {
			case 0:
				fmt.Fprintf(&b, "        %s: &%s {vm_disk: %d}\n", h, anchor(true), 32+g.r.IntN(3)*32)
			case 1:
				fmt.Fprintf(&b, "        %s: {pg_seq: %s}\n", h, ref())
			case 2:
				fmt.Fprintf(&b, "        %s: {<<: %s}\n", h, mref())
			default:
				fmt.Fprintf(&b, "        %s:\n", h)
			}
		}
	}
	b.WriteString("    pg-last:\n      hosts:\n")
	for _, h := range hs {
		fmt.Fprintf(&b, "        %s: {}\n", h)
	}
	g.files["pigsty.yml"] = b.String()
	return g.files, "pigsty.yml"
}

// genRanges writes host keys with ranges of every step form: empty, zero,
// negative and reversed steps, missing ends, zero padding, letters,
// spaces, underscores, signs, nested ranges, lone brackets and ports.
func genRanges(seed uint64) (map[string]string, string) {
	g := newKgen(seed, 3)
	num := func() string {
		return g.pick([]string{"", "1", "9", "11", "13", "20", "01", "09", "011", " 12", "1_2", "+11", "-1", "a", "1 2"})
	}
	var keys []string
	for i, n := 0, 1+g.r.IntN(3); i < n; i++ {
		var rng string
		switch g.r.IntN(8) {
		case 0:
			rng = fmt.Sprintf("[%s:%s]", num(), num())
		case 1:
			rng = fmt.Sprintf("[%s:%s:%s]", num(), num(), g.pick([]string{"", "0", "1", "2", "-1", "-2", " 2", "x", "05"}))
		case 2:
			rng = fmt.Sprintf("[%d:%d]", 10+g.r.IntN(10), 10+g.r.IntN(10))
		case 3:
			rng = fmt.Sprintf("[%d:%d:%d]", 10+g.r.IntN(10), 10+g.r.IntN(10), g.r.IntN(5)-2)
		case 4:
			rng = g.pick([]string{"[1:3", "[11]", "[]", "[:]", "[11:13:1:1]", "]1:3[", "[a:c]", "[1:3]:22", "|[1:2]", "[1:2]x"})
		default:
			rng = fmt.Sprintf("[%d:%d]", 10+g.r.IntN(5), 12+g.r.IntN(8))
		}
		key := "10.10.10." + rng
		if g.chance(0.15) {
			key = fmt.Sprintf("10.10.[10:%d].%d", 10+g.r.IntN(2), 10+g.r.IntN(20))
		}
		keys = append(keys, key)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "all:\n  vars: {pg_version: 17}\n  children:\n    pg-test:\n      vars: {vm_cpu: %d}\n      hosts:\n", 1+g.r.IntN(4))
	seen := map[string]bool{}
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			fmt.Fprintf(&b, "        %q: {vm_mem: %d}\n", k, 1024*(1+g.r.IntN(4)))
		}
	}
	b.WriteString("    pg-meta:\n      hosts:\n        10.10.10.10: {}\n")
	g.files["pigsty.yml"] = b.String()
	return g.files, "pigsty.yml"
}

// oddFiles are files an inventory directory may hold besides its YAML
// inventories: what Ansible ignores, what it reads with another plugin,
// what fails every plugin, links.
var oddFiles = map[string]string{
	"README.md":     "# notes\n",
	"old.retry":     "10.10.10.99\n",
	"site.ini":      "[web]\n10.10.10.98\n",
	"ansible.cfg":   "[defaults]\n",
	".hidden.yml":   "all: {hosts: {10.10.10.97: {}}}\n",
	"backup.yml~":   "all: {hosts: {10.10.10.96: {}}}\n",
	"prev.yml.bak":  "all: {hosts: {10.10.10.95: {}}}\n",
	"empty.yml":     "",
	"comments.yml":  "# nothing here\n",
	"null.yml":      "~\n",
	"docstart.yml":  "---\n# nothing\n",
	"emptymap.yml":  "{}\n",
	"hosts":         "[db]\n10.10.10.94\n",
	"plain":         "10.10.10.93\n",
	"list.yml":      "- 10.10.10.92\n",
	"extra.toml":    "[db.hosts]\n\"10.10.10.91\" = {}\n",
	"plugin.yml":    "plugin: constructed\n",
	"inv.json":      `{"all": {"hosts": {"10.10.10.90": {"vm_cpu": 1}}}}` + "\n",
	"more.yaml":     "all:\n  children:\n    pg-meta:\n      hosts:\n        10.10.10.12: {vm_cpu: 3}\n",
	"script.sh":     "x:#!/bin/sh\necho '{}'\n",
	"noexec":        "#!/bin/sh\nall: {hosts: {10.10.10.89: {}}}\n",
	"link.yml":      "->../shared/extra.yml",
	"dangling.yml":  "->../shared/missing.yml",
	"sub/inner.yml": "all:\n  children:\n    pg-test:\n      hosts:\n        10.10.10.13: {}\n",
	"linkdir":       "->../shared/dir",
	"bad.yml":       "all: {vars: {since: 2024-02-30}}\n",
}

// genDirectories writes an inventory directory (ansible-inventory -i
// inv/) with a main inventory and a few odd files, and the files the links
// point to.
func genDirectories(seed uint64) (map[string]string, string) {
	g := newKgen(seed, 4)
	g.files["inv/10-main.yml"] = fmt.Sprintf("all:\n  vars: {vm_cpu: %d}\n  children:\n    pg-meta:\n      hosts:\n        10.10.10.10: {}\n        10.10.10.11: {vm_mem: 2048}\n", 1+g.r.IntN(4))
	g.files["shared/extra.yml"] = "all:\n  children:\n    pg-meta:\n      vars: {vm_disk: 32}\n"
	g.files["shared/dir/x.yml"] = "all:\n  hosts:\n    10.10.10.14: {}\n"
	g.files["inv/group_vars/pg-meta.yml"] = "vm_mem: 1024\n"
	names := make([]string, 0, len(oddFiles))
	for n := range oddFiles {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := 0, 1+g.r.IntN(3); i < n; i++ {
		name := g.pick(names)
		g.files["inv/"+name] = oddFiles[name]
	}
	return g.files, "inv"
}

// genNames writes names that collide or that Ansible reads in a special
// way: a group named like a host, vars:/hosts:/children: given as a
// string, ungrouped nested under another group or listing hosts,
// top-level groups without all:, a group under two parents.
func genNames(seed uint64) (map[string]string, string) {
	g := newKgen(seed, 5)
	hs := g.hosts(2 + g.r.IntN(2))
	var b strings.Builder
	top := g.chance(0.3) // top-level groups, no all:
	ind := "    "
	if top {
		ind = ""
	} else {
		b.WriteString("all:\n  vars: {pg_version: 17}\n  children:\n")
	}
	fmt.Fprintf(&b, "%spg-meta:\n%s  hosts:\n", ind, ind)
	for _, h := range hs {
		fmt.Fprintf(&b, "%s    %s: {}\n", ind, h)
	}
	fmt.Fprintf(&b, "%s  vars: {vm_cpu: %d}\n", ind, 1+g.r.IntN(4))
	for i, n := 0, 1+g.r.IntN(3); i < n; i++ {
		h := g.pick(hs)
		switch g.r.IntN(9) {
		case 0: // a group named like a host, with its own group_vars
			fmt.Fprintf(&b, "%s%q:\n%s  hosts: {%s: {}}\n%s  vars: {vm_cpu: 3}\n", ind, h, ind, hs[0], ind)
			g.files["group_vars/"+h+".yml"] = "vm_mem: 2048\n"
		case 1:
			fmt.Fprintf(&b, "%sg-vars-string:\n%s  vars: %s\n%s  hosts: {%s: {}}\n", ind, ind, g.pick([]string{"vm_cpu", "pg_note", "vm_mem", "'5'", "5", "yes"}), ind, h)
		case 2:
			fmt.Fprintf(&b, "%sg-hosts-string:\n%s  hosts: %s\n", ind, ind, h)
		case 3:
			fmt.Fprintf(&b, "%sg-children-string:\n%s  children: pg-meta\n", ind, ind)
		case 4: // ungrouped nested under another group
			fmt.Fprintf(&b, "%sg-outer:\n%s  children:\n%s    ungrouped:\n%s      hosts: {%s: {}}\n", ind, ind, ind, ind, h)
		case 5:
			fmt.Fprintf(&b, "%sungrouped:\n%s  hosts: {%s: {vm_disk: 32}}\n", ind, ind, h)
		case 6:
			fmt.Fprintf(&b, "%sg-two:\n%s  children: {pg-meta: {}, %q: {}}\n", ind, ind, h)
		case 7:
			fmt.Fprintf(&b, "%s%s:\n%s  hosts: {%s: {vm_disk: 64}}\n", ind, g.pick([]string{"web", "db-1", "all-2"}), ind, h)
			g.files["host_vars/"+h+".yml"] = "vm_cpu: 1\n"
		default:
			fmt.Fprintf(&b, "%sg-list:\n%s  vars: []\n", ind, ind)
		}
	}
	g.files["pigsty.yml"] = b.String()
	return g.files, "pigsty.yml"
}

// genSymlinks writes an inventory reached through symlinks: the file, its
// directory, a chain of links, with group_vars/ and host_vars/ beside the
// link and beside the target holding different values, some of them
// links themselves.
func genSymlinks(seed uint64) (map[string]string, string) {
	g := newKgen(seed, 6)
	g.files["conf/dev.yml"] = "all:\n  children:\n    pg-meta:\n      hosts:\n        10.10.10.10: {}\n        10.10.10.11: {}\n"
	g.files["conf/group_vars/all.yml"] = "vm_cpu: 2\n"
	g.files["conf/host_vars/10.10.10.10.yml"] = "vm_mem: 1024\n"
	if g.chance(0.7) {
		g.files["group_vars/all.yml"] = fmt.Sprintf("vm_cpu: %d\n", 3+g.r.IntN(2))
	}
	if g.chance(0.3) {
		g.files["group_vars/pg-meta.yml"] = "->../conf/group_vars/all.yml"
	}
	if g.chance(0.3) {
		g.files["host_vars"] = "->conf/host_vars"
	}
	switch g.r.IntN(4) {
	case 0:
		g.files["pigsty.yml"] = "->conf/dev.yml"
	case 1:
		g.files["link2.yml"] = "->conf/dev.yml"
		g.files["pigsty.yml"] = "->link2.yml"
	case 2:
		g.files["pigsty.yml"] = "->" + g.pick([]string{"conf/missing.yml", "pigsty.yml"})
	default:
		g.files["inv"] = "->conf"
		return g.files, "inv/dev.yml"
	}
	return g.files, "pigsty.yml"
}
