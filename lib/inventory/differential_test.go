package inventory

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The differential suite: random Pigsty-shaped inventories, each compared
// with what ansible-inventory --list reads from it, for every consumed
// value of every host.
//
// An inventory has groups nested up to three deep below all (some groups
// under two parents, some defined twice), hosts listed in several groups
// (sometimes twice in one), hosts listed only under all (Ansible's
// ungrouped), ansible_group_priority, merge keys (<<: *anchor and
// <<: [*a, *b]) on group vars and host entries, and values written inline,
// in group_vars/ and host_vars/ files (.yml, .yaml, .json, no extension,
// several extensions of one name) and directories of files (with hidden,
// backup and foreign-extension files Ansible skips), spelled with YAML 1.1
// scalars (yes, 010, 0x4, 1_0, 1:30, ~, 12.10) and JSON numbers (1e3).
// One in five is an inventory directory (ansible-inventory -i DIR): two
// inventory files defining a group twice, files Ansible ignores, and the
// vars files inside it. One in sixteen holds something Ansible fails on.

// diffKinds are the generators of the differential suite, each with how
// many cases (seeds 1..n) one run compares: the precedence generator
// (writeCase, below) and one generator per kind of issue 24
// (differential_kinds_test.go). -short runs a fifth;
// BARN_ANSIBLE_DIFF_SCALE multiplies (e.g. 0.5, 4) and
// BARN_ANSIBLE_DIFF_KINDS=a,b runs only those kinds.
var diffKinds = []diffKind{
	{"precedence", 300, genPrecedence},
	{"scalars", 150, genScalars},
	{"anchors", 100, genAnchors},
	{"ranges", 100, genRanges},
	{"directories", 100, genDirectories},
	{"names", 100, genNames},
	{"symlinks", 60, genSymlinks},
}

// diffKind is one generator: files (path → content; "->target" is a
// symlink, a leading "#!" with mode x: see writeTree) and the inventory
// path given to both tools.
type diffKind struct {
	name  string
	cases int
	gen   func(seed uint64) (files map[string]string, inventory string)
}

type outcome int

const (
	outcomeAgree         outcome = iota // Barn resolves it; its hosts and every consumed value are Ansible's
	outcomeRefusedByBarn                // Ansible reads it; Barn refuses, stating Ansible's answer, and every value it reads is Ansible's
	outcomeRefusedByBoth                // Ansible cannot load it, and Barn refuses it
	outcomeSilent                       // a disagreement: the test fails
)

// TestAnsibleDifferential runs every generator of diffKinds from fixed
// seeds against ansible-inventory and reports, per kind, how many cases
// agree, are refused by Barn, are refused by both, and are silent
// disagreements (which fail the test).
func TestAnsibleDifferential(t *testing.T) {
	ans := needAnsible(t)
	scale := 1.0
	if testing.Short() {
		scale = 0.2
	}
	if s := os.Getenv("BARN_ANSIBLE_DIFF_SCALE"); s != "" {
		var err error
		if scale, err = strconv.ParseFloat(s, 64); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	total := map[outcome]int{}
	only := os.Getenv("BARN_ANSIBLE_DIFF_KINDS") // e.g. names,scalars
	for _, k := range diffKinds {
		if only != "" && !contains(strings.Split(only, ","), k.name) {
			continue
		}
		n := int(float64(k.cases) * scale)
		counts := map[outcome]int{}
		for seed := uint64(1); seed <= uint64(n); seed++ {
			o := diffOne(t, ans, k, seed)
			counts[o]++
			total[o]++
		}
		t.Logf("differential %-11s %4d cases: %4d agree, %3d refused by Barn, %3d refused by both, %d silent",
			k.name, n, counts[outcomeAgree], counts[outcomeRefusedByBarn], counts[outcomeRefusedByBoth], counts[outcomeSilent])
		if n >= 50 && (counts[outcomeAgree] < n/10 || counts[outcomeRefusedByBoth] == 0) {
			t.Errorf("the %s generator is off balance: %v", k.name, counts)
		}
	}
	n := total[outcomeAgree] + total[outcomeRefusedByBarn] + total[outcomeRefusedByBoth] + total[outcomeSilent]
	t.Logf("differential: %d generated inventories against ansible-core %s in %v: %d agree, %d refused by Barn, %d refused by both, %d silent",
		n, ans.Version, time.Since(start).Round(time.Second), total[outcomeAgree], total[outcomeRefusedByBarn], total[outcomeRefusedByBoth], total[outcomeSilent])
}

// diffOne writes case seed of kind k and compares Barn with Ansible on it.
func diffOne(t testing.TB, ans *ansibleDriver, k diffKind, seed uint64) outcome {
	t.Helper()
	files, inv := k.gen(seed)
	path := filepath.Join(writeTree(t, files), inv)
	theirs, err := ans.list(path)
	if err != nil {
		t.Fatal(err)
	}
	in, openErr := Open(path)
	o := compareWithAnsible(t, fmt.Sprintf("%s seed %d (%s)", k.name, seed, path), in, openErr, theirs)
	if o == outcomeSilent {
		t.Errorf("%s seed %d: a silent disagreement; regenerate it with %s(%d)", k.name, seed, funcName(k.name), seed)
	}
	return o
}

func funcName(kind string) string {
	return "gen" + strings.ToUpper(kind[:1]) + kind[1:]
}

// FuzzAnsibleDifferential feeds fuzzed seeds of every generator to the
// same comparison (go test -fuzz FuzzAnsibleDifferential); a silent
// disagreement fails.
func FuzzAnsibleDifferential(f *testing.F) {
	for i := range diffKinds {
		for _, s := range []uint64{3, 11, 2024} {
			f.Add(uint8(i), s)
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, seed uint64) {
		ans := needAnsible(t)
		diffOne(t, ans, diffKinds[int(kind)%len(diffKinds)], seed)
	})
}

// genPrecedence is writeCase's generator as a diffKind.
func genPrecedence(seed uint64) (map[string]string, string) {
	g := newGen(seed)
	g.generate()
	files := map[string]string{}
	for p, content := range g.files {
		if g.dirMode {
			p = "inv/" + p
		}
		files[p] = content
	}
	if g.dirMode {
		return files, "inv"
	}
	return files, "pigsty.yml"
}

// compareWithAnsible is the differential rule for one inventory (in, or
// openErr when Barn refuses to open it):
//   - Ansible cannot load it: Barn must refuse it;
//   - Ansible reads it and Barn refuses it: every consumed value Barn
//     reads (HostVars) must equal Ansible's, and every refusal must state
//     Ansible's answer: its pick (Problem.Ansible, equal to Ansible's
//     value) or, for refusals of what Barn does not read as Ansible does,
//     a message saying what Ansible does;
//   - Barn resolves it: the hosts must be Ansible's, every consumed value
//     Ansible's, and the spec's node names, FQDNs, CPUs and memory follow
//     from Ansible's values.
func compareWithAnsible(t testing.TB, name string, in *Input, openErr error, theirs ansibleAnswer) outcome {
	t.Helper()
	if openErr != nil || !theirs.OK {
		return compareRefusal(t, name, in, openErr, theirs)
	}
	ours, err := HostVars(in)
	want := consumedOf(theirs.Hostvars)
	silent := false
	for h, vars := range ours {
		w, ok := want[h]
		if !ok {
			w = map[string]any{}
		}
		if got, w := normalise(t, vars), normalise(t, w); !reflect.DeepEqual(got, w) {
			t.Errorf("%s: host %s:\nbarn:    %v\nansible: %v", name, h, got, w)
			silent = true
		}
	}
	if err != nil {
		if !statesAnsible(t, name, Problems(err), want) || silent {
			return outcomeSilent
		}
		return outcomeRefusedByBarn
	}
	if got := hostNames(ours); !reflect.DeepEqual(got, theirs.Hosts) {
		t.Errorf("%s: hosts differ:\nbarn:    %v\nansible: %v", name, got, theirs.Hosts)
		return outcomeSilent
	}
	if silent {
		return outcomeSilent
	}
	s, _, err := ResolveInput(in)
	if err != nil {
		for _, p := range Problems(err) {
			if p.Ansible != nil {
				t.Errorf("%s: Resolve refuses an ambiguity HostVars accepts: %s", name, p)
				return outcomeSilent
			}
		}
		return outcomeRefusedByBarn
	}
	for _, n := range s.Nodes {
		v := want[n.Address]
		name0, fqdn := expectedName(n.Address, v)
		if n.Name != name0 || n.FQDN != fqdn {
			t.Errorf("%s: node %s is %s (fqdn %q); Ansible's values give %s (fqdn %q)", name, n.Address, n.Name, n.FQDN, name0, fqdn)
			silent = true
		}
		if cpu, ok := v["vm_cpu"].(float64); ok && int(cpu) != n.CPUs {
			t.Errorf("%s: node %s has %d CPUs; Ansible's vm_cpu is %v", name, n.Name, n.CPUs, cpu)
			silent = true
		}
		if mem, ok := v["vm_mem"].(float64); ok && int64(mem)<<20 != n.MemoryBytes {
			t.Errorf("%s: node %s has %d bytes of memory; Ansible's vm_mem is %v MiB", name, n.Name, n.MemoryBytes, mem)
			silent = true
		}
	}
	if silent {
		return outcomeSilent
	}
	return outcomeAgree
}

// compareRefusal: Barn refuses to open it, or Ansible cannot load it.
func compareRefusal(t testing.TB, name string, in *Input, openErr error, theirs ansibleAnswer) outcome {
	t.Helper()
	if !theirs.OK {
		if openErr != nil {
			return outcomeRefusedByBoth
		}
		if _, err := HostVars(in); err != nil {
			return outcomeRefusedByBoth
		}
		if _, _, err := ResolveInput(in); err != nil {
			return outcomeRefusedByBoth
		}
		t.Errorf("%s: Ansible cannot load it (%.300s) but Barn resolves it", name, theirs.Error)
		return outcomeSilent
	}
	if !strings.Contains(openErr.Error(), "Ansible") {
		t.Errorf("%s: Ansible reads it, and Barn refuses to open it without saying what Ansible does: %v", name, openErr)
		return outcomeSilent
	}
	return outcomeRefusedByBarn
}

// statesAnsible checks that every problem of a refusal states Ansible's
// answer: a pick equal to Ansible's value of the key, or a message saying
// what Ansible does.
func statesAnsible(t testing.TB, name string, ps []Problem, want map[string]map[string]any) bool {
	t.Helper()
	ok := true
	for _, p := range ps {
		switch {
		case p.Ansible == nil && !strings.Contains(p.String(), "Ansible"):
			t.Errorf("%s: Barn refuses without stating Ansible's answer: %s", name, p)
			ok = false
		case p.Ansible == nil:
		case !strings.Contains(p.Message, p.Ansible.Written) && !strings.Contains(p.Message, fmt.Sprint(p.Ansible.Value)):
			t.Errorf("%s: the message does not name Ansible's pick %q: %s", name, p.Ansible.Written, p)
			ok = false
		case p.Key == "ansible_group_priority": // not a host variable; its effect shows in every value above
		default:
			if got, w := normalise(t, p.Ansible.Value), normalise(t, want[p.Host][p.Key]); !reflect.DeepEqual(got, w) {
				t.Errorf("%s: Barn says Ansible picks %v, Ansible says %v: %s", name, got, w, p)
				ok = false
			}
		}
	}
	return ok
}

// expectedName derives a node's name from Ansible's values as Pigsty
// names the host: nodename, else pg_cluster-pg_seq, else node-<octet>.
func expectedName(addr string, v map[string]any) (string, string) {
	if s, ok := v["nodename"].(string); ok && s != "" {
		name, fqdn, _ := SplitNodename(s)
		return name, fqdn
	}
	c, ok1 := v["pg_cluster"].(string)
	q, ok2 := v["pg_seq"].(float64)
	if ok1 && ok2 {
		return fmt.Sprintf("%s-%d", c, int64(q)), ""
	}
	return fmt.Sprintf("node-%d", netip.MustParseAddr(addr).As4()[3]), ""
}

// writeCase generates the precedence inventory of seed in a new temporary
// directory and returns the inventory's path.
func writeCase(t testing.TB, seed uint64) string {
	t.Helper()
	files, inv := genPrecedence(seed)
	return filepath.Join(writeTree(t, files), inv)
}

// gen builds one inventory.
type gen struct {
	r       *rand.Rand
	files   map[string]string
	groups  []*ggroup // every group, level by level
	occs    []*occ    // every place a group is written, in emission order
	root    *occ      // all
	hosts   []string
	keys    []string // the consumed keys this case sets
	anchors []string // anchors of group vars written so far
	hostAnc []string // anchors of host entries written so far
	nAnchor int
	vars    map[string]map[string]string // file path → key → spelling
	varsJS  map[string]bool              // file path written as JSON
	tricky  float64                      // how often a value is spelled trickily
	// dirMode writes an inventory directory inv/ (ansible-inventory -i
	// inv/): the inventory split over two files, its vars files inside.
	dirMode bool
}

type ggroup struct {
	name  string
	level int
}

// occ is one place a group is written, with what is written there.
type occ struct {
	g        *ggroup
	children []*occ
	vars     [][2]string // key, spelling
	merge    []string    // anchors merged into vars
	hosts    []*hostEntry
	order    []string // section order: vars, hosts, children
	scalar   string   // written as `name: scalar`, not a group definition
}

type hostEntry struct {
	addr  string
	vars  [][2]string
	merge []string
}

var (
	level1 = []string{"infra", "etcd", "pg-meta", "pg-test", "pg-a", "pg-b", "minio"}
	level2 = []string{"web", "db", "zone-a", "zone-b", "cache"}
	level3 = []string{"rack-1", "rack-2", "edge"}
)

// spellings are the values a case writes per consumed key: good ones Barn
// accepts, and tricky ones (YAML 1.1 scalars such as yes, 010, 0x4, 1_0,
// 1:30, ~, 12.10; quoted numbers; JSON's 1e3) that Ansible reads in ways a
// human may not, which Barn refuses with the reading spelled out.
type spellings struct{ good, tricky []string }

var values = map[string]spellings{
	"vm_cpu":              {[]string{"1", "2", "4"}, []string{`"2"`, "010", "0x4", "1_0", "yes", "~", "2.0", "+3"}},
	"vm_mem":              {[]string{"1024", "2048", "4096", "1GiB", "768"}, []string{`"1024"`, "2_048", "1.5e+3"}},
	"vm_disk":             {[]string{"32", "64", "8GiB"}, []string{"1:30", "0x20"}},
	"nodename":            {[]string{"node-a", "node-b", "db.lab", "pigsty.cc", "''"}, []string{`"on"`, "on", "2001", "NoDe"}},
	"pg_cluster":          {[]string{"pg-a", "pg-b", "pg-test"}, []string{"~", "yes"}},
	"pg_seq":              {[]string{"1", "2", "3"}, []string{"08", `"4"`, "1:30", "0b11"}},
	"vm_skip":             {[]string{"false", "no", "off", "Off"}, []string{"true", `"true"`, "True"}},
	"admin_ip":            {[]string{"10.10.10.10", "10.10.10.11", `"10.10.10.12"`}, []string{"10.10.10.012"}},
	"node_admin_username": {[]string{"dba", "'dba'"}, []string{"alice"}},
	"node_admin_uid":      {[]string{"88"}, []string{"1000", "0088"}},
	"vm_image":            {[]string{"d12", `"d12@12"`, "u24:stable"}, []string{"D12"}},
	"vm_version":          {[]string{"12", `"12.1"`}, []string{"12.10", "12.1"}},
	"vm_arch":             {[]string{"native", "amd64", "x86_64"}, []string{"X64", "aarch64"}},
	"vm_alias":            {[]string{"[a.lab]", "[b.lab, c.lab]", "[]"}, []string{"a.lab"}},
	"vm_disks":            {[]string{"[]", "[{path: /data}]", "[{path: /data, size: 8GiB}]", "[{path: /pg, persistent: yes}]"}, []string{"[{path: /data, size: 8G}]"}},
}

var jsonValues = map[string]spellings{
	"vm_cpu":              {[]string{"1", "2"}, []string{`"2"`, "1e0", "2.0", "true", "null"}},
	"vm_mem":              {[]string{"1024", `"1GiB"`}, []string{"1e3", "2048.0"}},
	"vm_disk":             {[]string{"32", `"8GiB"`}, []string{"3.2e1"}},
	"nodename":            {[]string{`"node-a"`, `"db.lab"`}, []string{`"on"`, "true"}},
	"pg_cluster":          {[]string{`"pg-a"`, `"pg-b"`}, []string{"null"}},
	"pg_seq":              {[]string{"1", "2"}, []string{`"3"`, "1E1"}},
	"vm_skip":             {[]string{"false"}, []string{"true", `"yes"`}},
	"admin_ip":            {[]string{`"10.10.10.10"`, `"10.10.10.11"`}, nil},
	"node_admin_username": {[]string{`"dba"`}, []string{`"alice"`}},
	"node_admin_uid":      {[]string{"88"}, []string{"1000"}},
	"vm_image":            {[]string{`"d12"`, `"d12@12"`}, nil},
	"vm_version":          {[]string{`"12.1"`, "12"}, []string{"12.10"}},
	"vm_arch":             {[]string{`"native"`}, []string{`"amd64"`}},
	"vm_alias":            {[]string{`["a.lab"]`, "[]"}, nil},
	"vm_disks":            {[]string{"[]", `[{"path": "/data"}]`}, nil},
}

// spell picks a spelling: tricky ones with the case's trickiness.
func (g *gen) spell(sp spellings) string {
	if len(sp.tricky) > 0 && g.chance(g.tricky) {
		return pick(g, sp.tricky)
	}
	return pick(g, sp.good)
}

func newGen(seed uint64) *gen {
	return &gen{r: rand.New(rand.NewPCG(seed, seed*0x9e3779b97f4a7c15+1)), files: map[string]string{},
		vars: map[string]map[string]string{}, varsJS: map[string]bool{}}
}

func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

func pick[T any](g *gen, list []T) T { return list[g.r.IntN(len(list))] }

func (g *gen) generate() {
	if g.chance(0.5) {
		g.tricky = 0.3
	}
	g.dirMode = g.chance(0.2)
	// Keys: a few per case, so that they collide often.
	all := make([]string, 0, len(values))
	for k := range values {
		all = append(all, k)
	}
	sort.Strings(all)
	g.r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	g.keys = all[:2+g.r.IntN(4)]
	if g.chance(0.5) && !contains(g.keys, "vm_cpu") {
		g.keys = append(g.keys, "vm_cpu") // tie-breaking is most visible on one key
	}
	// Groups: level 1 under all, level 2 and 3 below, some twice.
	g.root = &occ{g: &ggroup{name: "all"}}
	shuffled := func(pool []string, n int) []string {
		p := append([]string{}, pool...)
		g.r.Shuffle(len(p), func(i, j int) { p[i], p[j] = p[j], p[i] })
		return p[:n]
	}
	var l1, l2 []*occ
	for _, n := range shuffled(level1, 2+g.r.IntN(3)) {
		o := g.place(&ggroup{name: n, level: 1}, g.root)
		l1 = append(l1, o)
	}
	for _, n := range shuffled(level2, g.r.IntN(4)) {
		o := g.place(&ggroup{name: n, level: 2}, pick(g, l1))
		l2 = append(l2, o)
		if g.chance(0.3) { // the same group under a second parent
			g.place(o.g, pick(g, l1))
		}
	}
	for _, n := range shuffled(level3, g.r.IntN(3)) {
		parents := append(append([]*occ{}, l2...), l1...)
		if len(l2) > 0 {
			parents = l2
		}
		g.place(&ggroup{name: n, level: 3}, pick(g, parents))
		if g.chance(0.3) {
			g.place(g.groups[len(g.groups)-1], pick(g, l1))
		}
	}
	// Hosts in one to three groups, sometimes only under all.
	for i, n := 0, 2+g.r.IntN(4); i < n; i++ {
		addr := fmt.Sprintf("10.10.10.%d", 10+g.r.IntN(20))
		if contains(g.hosts, addr) {
			continue
		}
		g.hosts = append(g.hosts, addr)
		if g.chance(0.1) {
			g.root.hosts = append(g.root.hosts, &hostEntry{addr: addr})
			continue
		}
		for j, m := 0, 1+g.r.IntN(3); j < m; j++ {
			o := pick(g, g.occs)
			o.hosts = append(o.hosts, &hostEntry{addr: addr})
		}
	}
	// Values: each key in one to four places.
	for _, k := range g.keys {
		for j, m := 0, 1+g.r.IntN(4); j < m; j++ {
			g.assign(k)
		}
	}
	// Priorities, in the inventory (honoured) or in group_vars (not).
	for _, o := range g.occs {
		if g.chance(0.25) {
			o.vars = append(o.vars, [2]string{"ansible_group_priority", fmt.Sprint(1 + g.r.IntN(4))})
		}
	}
	if g.chance(0.15) && len(g.groups) > 0 {
		g.fileVar("group_vars/"+pick(g, g.groups).name+".yml", "ansible_group_priority", "9")
	}
	// An opaque variable or two, which never matter.
	g.root.vars = append(g.root.vars, [2]string{"pg_version", "17"})
	// Now and then, something Ansible itself fails on.
	if g.chance(0.06) {
		switch o := pick(g, g.occs); g.r.IntN(4) {
		case 0:
			o.vars = append([][2]string{{"ansible_group_priority", "~"}}, o.vars...) // int(None)
		case 3:
			o.vars = append(o.vars, [2]string{"pg_note", pick(g, []string{"=", "!custom x", "[a, =]"})}) // PyYAML cannot construct it
		case 1:
			o.children = append(o.children, &occ{g: &ggroup{name: "not-a-group"}, scalar: "5"})
		default:
			h := pick(g, g.hosts)
			for p := range g.vars {
				if strings.HasPrefix(p, "host_vars/"+h) {
					delete(g.vars, p)
				}
			}
			g.files["host_vars/"+h+".yml"] = "- a list, not a mapping\n"
		}
	}
	g.emit()
}

// place writes group gr under parent (a second place for an existing group
// makes it defined twice).
func (g *gen) place(gr *ggroup, parent *occ) *occ {
	o := &occ{g: gr, order: []string{"vars", "hosts", "children"}}
	g.r.Shuffle(3, func(i, j int) { o.order[i], o.order[j] = o.order[j], o.order[i] })
	parent.children = append(parent.children, o)
	g.occs = append(g.occs, o)
	found := false
	for _, x := range g.groups {
		found = found || x == gr
	}
	if !found {
		g.groups = append(g.groups, gr)
	}
	return o
}

// assign writes one value of key somewhere.
func (g *gen) assign(key string) {
	v := g.spell(values[key])
	switch g.r.IntN(7) {
	case 0:
		g.root.vars = append(g.root.vars, [2]string{key, v})
	case 1, 2:
		o := pick(g, g.occs)
		o.vars = append(o.vars, [2]string{key, v})
	case 3:
		var entries []*hostEntry
		for _, o := range append(g.occs, g.root) {
			entries = append(entries, o.hosts...)
		}
		if len(entries) > 0 {
			e := pick(g, entries)
			e.vars = append(e.vars, [2]string{key, v})
		}
	case 4:
		g.fileVar(g.varsPath("group_vars", "all"), key, "")
	case 5:
		if len(g.groups) > 0 {
			names := []string{"ungrouped"}
			for _, x := range g.groups {
				names = append(names, x.name)
			}
			g.fileVar(g.varsPath("group_vars", pick(g, names)), key, "")
		}
	case 6:
		if len(g.hosts) > 0 {
			g.fileVar(g.varsPath("host_vars", pick(g, g.hosts)), key, "")
		}
	}
}

// varsPath picks a file for entity name: NAME.yml, .yaml, .json, NAME, or
// a file in the directory NAME/. One entity keeps one form per case
// (plus, sometimes, a second extension Ansible ignores).
func (g *gen) varsPath(sub, name string) string {
	base := sub + "/" + name
	for p := range g.vars {
		if p == base || strings.HasPrefix(p, base+".") || strings.HasPrefix(p, base+"/") {
			if strings.HasPrefix(p, base+"/") {
				if g.chance(0.5) {
					return base + "/" + pick(g, []string{"10-base.yml", "20-more.yaml", "30-json.json", "main", "sub/40-deep.yml"})
				}
			}
			return p
		}
	}
	switch g.r.IntN(6) {
	case 0:
		return base + ".yaml"
	case 1:
		return base + ".json"
	case 2:
		return base
	case 3:
		return base + "/" + pick(g, []string{"10-base.yml", "20-more.yaml", "30-json.json", "main"})
	}
	return base + ".yml"
}

// fileVar sets key in a vars file (spelling "" picks one).
func (g *gen) fileVar(path, key, spelling string) {
	if g.vars[path] == nil {
		g.vars[path] = map[string]string{}
		g.varsJS[path] = strings.HasSuffix(path, ".json")
	}
	if spelling == "" {
		if g.varsJS[path] {
			spelling = g.spell(jsonValues[key])
		} else {
			spelling = g.spell(values[key])
		}
	}
	g.vars[path][key] = spelling
}

// emit writes the inventory and every vars file.
func (g *gen) emit() {
	var b strings.Builder
	b.WriteString("# generated by the differential suite\nall:\n")
	g.emitOcc(&b, g.root, 1)
	g.files["pigsty.yml"] = b.String()
	if g.dirMode {
		// A second inventory file defines a group again, with more hosts
		// and values; Ansible parses the directory's files in name order
		// and skips what its IGNORED patterns name.
		var x strings.Builder
		gr := pick(g, g.groups)
		fmt.Fprintf(&x, "all:\n  children:\n    %s:\n      hosts:\n", gr.name)
		for _, h := range g.hosts[:1+g.r.IntN(len(g.hosts))] {
			k := pick(g, g.keys)
			fmt.Fprintf(&x, "        %s: {%s: %s}\n", h, k, g.spell(values[k]))
		}
		if g.chance(0.5) {
			k := pick(g, g.keys)
			fmt.Fprintf(&x, "      vars:\n        %s: %s\n", k, g.spell(values[k]))
		}
		g.files["zz-more.yml"] = x.String()
		g.files["README.md"] = "not an inventory\n"
		g.files["old.retry"] = "10.10.10.99\n"
		g.files[".hidden.yml"] = "all: {hosts: {10.10.10.98: {}}}\n"
	}
	for p, vars := range g.vars {
		keys := make([]string, 0, len(vars))
		for k := range vars {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var f strings.Builder
		if g.varsJS[p] {
			f.WriteString("{")
			for i, k := range keys {
				if i > 0 {
					f.WriteString(", ")
				}
				fmt.Fprintf(&f, "%q: %s", k, vars[k])
			}
			f.WriteString("}\n")
		} else {
			for _, k := range keys {
				fmt.Fprintf(&f, "%s: %s\n", k, vars[k])
			}
		}
		g.files[p] = f.String()
		// What Ansible skips beside it: must never count.
		if dir := filepath.Dir(p); strings.Count(p, "/") >= 2 && g.chance(0.5) {
			decoy := fmt.Sprintf("%s: %s\n", keys[0], g.spell(values[keys[0]]))
			g.files[dir+"/"+pick(g, []string{".hidden.yml", "old.yml~", "notes.txt", "x.cfg.d/inner.yml"})] = decoy
		} else if !strings.Contains(strings.TrimPrefix(p, "group_vars/"), "/") && !strings.Contains(strings.TrimPrefix(p, "host_vars/"), "/") && g.chance(0.2) {
			// A second extension of the same name, which find_vars_files
			// never reaches when an earlier one exists.
			ext := filepath.Ext(p)
			if ext == ".yml" || ext == ".yaml" {
				g.files[strings.TrimSuffix(p, ext)+".json"] = fmt.Sprintf("{%q: %s}\n", keys[0], g.spell(jsonValues[keys[0]]))
			}
		}
	}
}

func (g *gen) emitOcc(b *strings.Builder, o *occ, depth int) {
	ind := strings.Repeat("  ", depth)
	order := o.order
	if o == g.root {
		order = []string{"vars", "hosts", "children"}
	}
	for _, sec := range order {
		switch sec {
		case "vars":
			if len(o.vars) == 0 {
				continue
			}
			anchor := ""
			if g.chance(0.3) {
				g.nAnchor++
				anchor = fmt.Sprintf(" &gv%d", g.nAnchor)
			}
			fmt.Fprintf(b, "%svars:%s\n", ind, anchor)
			if len(g.anchors) > 0 && g.chance(0.3) {
				if g.chance(0.5) || len(g.anchors) == 1 {
					fmt.Fprintf(b, "%s  <<: *%s\n", ind, pick(g, g.anchors))
				} else {
					fmt.Fprintf(b, "%s  <<: [*%s, *%s]\n", ind, g.anchors[0], g.anchors[len(g.anchors)-1])
				}
			}
			seen := map[string]bool{}
			for _, kv := range o.vars {
				if seen[kv[0]] {
					continue // one key once per mapping; twice is a defined-twice group
				}
				seen[kv[0]] = true
				fmt.Fprintf(b, "%s  %s: %s\n", ind, kv[0], kv[1])
			}
			if anchor != "" {
				g.anchors = append(g.anchors, strings.TrimPrefix(anchor, " &"))
			}
		case "hosts":
			if len(o.hosts) == 0 {
				continue
			}
			fmt.Fprintf(b, "%shosts:\n", ind)
			seenHost := map[string]bool{}
			for _, h := range o.hosts {
				if seenHost[h.addr] {
					continue // a duplicate key in one mapping; Barn and Ansible differ on purpose there
				}
				seenHost[h.addr] = true
				anchor := ""
				if len(h.vars) > 0 && g.chance(0.3) {
					g.nAnchor++
					anchor = fmt.Sprintf("&hv%d ", g.nAnchor)
				}
				var parts []string
				if len(g.hostAnc) > 0 && g.chance(0.3) {
					parts = append(parts, "<<: *"+pick(g, g.hostAnc))
				}
				seen := map[string]bool{}
				for _, kv := range h.vars {
					if !seen[kv[0]] {
						seen[kv[0]] = true
						parts = append(parts, kv[0]+": "+kv[1])
					}
				}
				switch {
				case len(parts) == 0 && g.chance(0.5):
					fmt.Fprintf(b, "%s  %s:\n", ind, h.addr)
				default:
					fmt.Fprintf(b, "%s  %s: %s{%s}\n", ind, h.addr, anchor, strings.Join(parts, ", "))
				}
				if anchor != "" {
					g.hostAnc = append(g.hostAnc, strings.TrimSpace(strings.TrimPrefix(anchor, "&")))
				}
			}
		case "children":
			if len(o.children) == 0 {
				continue
			}
			fmt.Fprintf(b, "%schildren:\n", ind)
			seen := map[string]bool{}
			for _, c := range o.children {
				if seen[c.g.name] {
					continue
				}
				seen[c.g.name] = true
				if c.scalar != "" {
					fmt.Fprintf(b, "%s  %s: %s\n", ind, c.g.name, c.scalar)
					continue
				}
				if len(c.vars) == 0 && len(c.hosts) == 0 && len(c.children) == 0 {
					fmt.Fprintf(b, "%s  %s:\n", ind, c.g.name)
					continue
				}
				fmt.Fprintf(b, "%s  %s:\n", ind, c.g.name)
				g.emitOcc(b, c, depth+2)
			}
		}
	}
}
