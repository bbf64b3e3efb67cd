package inventory

import (
	"cmp"
	"fmt"
	"io/fs"
	"net/netip"
	"path"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"barn.dev/lib/inventory/yaml11"
	"barn.dev/lib/spec"
)

// Defaults applied when the inventory does not set a value.
const (
	// DefaultImage is the request of a host without vm_image: the active
	// catalog's defaults.image on its default channel, chosen by barn-plan
	// when it resolves exact artifacts (so a catalog update never moves a
	// spec hash). vm_version alone becomes "@VERSION" of that family.
	DefaultImage     = ""
	DefaultArch      = "native"
	DefaultCPUs      = 2
	DefaultMemoryMiB = 4096
	DefaultDiskGiB   = 64
	DefaultDataGiB   = 128
	DefaultUser      = spec.DbaUser
	DbaUID           = spec.DbaUID
	DefaultCIDR      = "10.10.10.0/24"
	MaxNodes         = spec.MaxNodes
	MaxShares        = spec.MaxShares
	MinMemoryBytes   = spec.MinMemoryBytes
)

// Warning is a resolve-time warning (see spec.Warning for the codes).
type Warning = spec.Warning

// analysis is everything learnt from one inventory: the model, every
// host's settings and resolved node, the spec (when valid) and problems.
type analysis struct {
	in       *Input
	r        *reader // the first inventory file; every reader shares its session
	m        *model
	hosts    []*hostResult
	spec     *spec.Spec
	warnings []Warning
	finder   *varsFinder
	vars     map[string][]*parsedVars // by "group_vars/<name>" or "host_vars/<name>"
	parsed   map[string]*parsedVars   // by path
	read     []string                 // vars files read, in first-read order
}

// hostResult is one host's resolution, kept for explain.
type hostResult struct {
	h        *host
	addr     netip.Addr
	addrOK   bool
	skip     bool
	settings map[string]*setting
	nameFrom string // "nodename", "pg_cluster-pg_seq" or "address"
	node     spec.Node
	user     string
	uid      int64
	arch     string
	uidSet   bool
	adminIP  netip.Addr // admin_ip as resolved for this host; invalid when unset
}

// Resolve reads one inventory document without a directory (source names
// it in messages: a path, or "<stdin>"; no group_vars/ or host_vars/ are
// read) and returns the sealed barn.spec/v1 document and its warnings. See
// ResolveInput.
func Resolve(data []byte, source string) (*spec.Spec, []Warning, error) {
	return ResolveInput(Bytes(data, source))
}

// ResolveInput resolves an inventory with every source Ansible reads for
// it and returns the sealed barn.spec/v1 document and its warnings. Every
// failure is an *exitcode.Error of class usage whose Detail is the
// []Problem list of the whole inventory.
func ResolveInput(in *Input) (*spec.Spec, []Warning, error) {
	a := analyse(in)
	if !a.r.probs.empty() {
		return nil, a.warnings, errorOf(a.r.probs.sorted(), a.in.Name)
	}
	return a.spec, a.warnings, nil
}

func analyse(in *Input) *analysis {
	a := &analysis{}
	if !a.load(in) {
		return a
	}
	for _, name := range a.m.HostOrder {
		a.hosts = append(a.hosts, a.resolveHost(a.m.Hosts[name]))
		if a.r.stop {
			return a
		}
	}
	a.unusedVarsFiles()
	a.deployment()
	return a
}

// load parses every inventory file into the model (a.m, nil when nothing
// could be parsed) and prepares the vars files; false when resolving
// further is pointless.
func (a *analysis) load(in *Input) bool {
	a.in, a.vars, a.parsed = in, map[string][]*parsedVars{}, map[string]*parsedVars{}
	a.r = newReader(in.Name)
	if len(in.Files) > 0 {
		a.r.file = in.Files[0].Path
	}
	a.finder = &varsFinder{in: in, prob: func(p Problem) { a.r.probs.add(p) }, warn: func(code, msg string) {
		a.warnings = append(a.warnings, Warning{Code: code, Message: msg})
	}}
	m := newModel()
	parsed := false
	for i, f := range in.Files {
		r := a.r
		if i > 0 {
			r = a.r.sibling(f.Path)
		}
		var root *yaml.Node
		before := len(a.r.probs.list)
		if len(in.Files) == 1 {
			root = r.parseDocument(f.Data)
		} else if n, ok := r.parseData(f.Data); ok && n != nil && !falsy(r, n) {
			root = n
		} else if ok && !iniBlank(f.Data) {
			r.fileProblem("Ansible's yaml plugin finds no data in this file of the inventory directory, and Ansible then reads it with its ini plugin (its lines as host names, or a failure)",
				"remove it from the directory, or leave only comments in it")
		}
		added := root != nil && m.addFile(r, root)
		parsed = parsed || added
		if len(a.r.probs.list) > before && !added && f.Path != in.Name {
			// A file of an inventory directory: Ansible's yaml plugin
			// fails on it too, and Ansible then tries its ini plugin,
			// which reads what YAML does not.
			a.r.probs.note(before, "; Ansible's yaml plugin fails on it too and Ansible then tries its ini plugin, which Barn does not have")
		}
		if r.stop {
			return false
		}
	}
	if !parsed {
		if a.r.probs.empty() {
			a.r.fileProblem("the inventory is empty", "write an inventory with an all: group, e.g. barn-inventory init")
		}
		return false
	}
	a.m = m
	m.finish(a.r)
	for _, w := range m.Warnings {
		aw := Warning{Code: w.Code, Message: w.Message}
		if w.Node != nil {
			aw.File, aw.Line = w.File, w.Node.Line
		}
		a.warnings = append(a.warnings, aw)
	}
	return !a.r.stop
}

// iniBlank reports whether Ansible's ini plugin reads nothing from data:
// every line blank or a comment (# or ;).
func iniBlank(data []byte) bool {
	for _, l := range strings.Split(string(data), "\n") {
		if t := strings.TrimSpace(l); t != "" && t[0] != '#' && t[0] != ';' {
			return false
		}
	}
	return true
}

func (a *analysis) warnf(n *yaml.Node, code, format string, args ...any) {
	w := Warning{Code: code, Message: fmt.Sprintf(format, args...)}
	for _, have := range a.warnings {
		if have.Message == w.Message {
			return
		}
	}
	a.warnings = append(a.warnings, w)
}

// unusedVarsFiles warns about group_vars/ and host_vars/ entries that name
// no group or host of the inventory: Ansible never reads them (a typo in a
// file name fails silently there).
func (a *analysis) unusedVarsFiles() {
	if a.in.Vars == nil {
		return
	}
	for _, sub := range []string{"group_vars", "host_vars"} {
		entries, err := fs.ReadDir(a.in.Vars, sub)
		if err != nil {
			continue
		}
		for _, e := range entries {
			n := e.Name()
			if strings.HasPrefix(n, ".") || strings.HasSuffix(n, "~") {
				continue
			}
			name := n
			if ext := path.Ext(n); contains(yamlExtensions, ext) {
				name = strings.TrimSuffix(n, ext)
			}
			known := false
			if sub == "group_vars" {
				_, known = a.m.Groups[name]
			} else {
				_, known = a.m.Hosts[name]
			}
			if !known {
				kind := map[string]string{"group_vars": "group", "host_vars": "host"}[sub]
				a.warnf(nil, "unused_vars_file", "%s names no %s of the inventory; Ansible never reads it", a.finder.name(path.Join(sub, n)), kind)
			}
		}
	}
}

// sources lists every file read: the inventory files, then the vars files
// by path.
func (a *analysis) sources() []string {
	var out []string
	if len(a.in.Files) != 1 || a.in.Files[0].Path != a.in.Name {
		out = append(out, a.in.Name) // an inventory directory, as named, before its files
	}
	for _, f := range a.in.Files {
		out = append(out, f.Path)
	}
	read := append([]string{}, a.read...)
	sort.Strings(read)
	return append(out, read...)
}

// resolveHost reads host h's consumed settings into its node, in key order,
// each problem at the setting (or host) it concerns.
func (a *analysis) resolveHost(h *host) *hostResult {
	hr := &hostResult{h: h, settings: a.settings(h)}
	a.address(hr)
	a.adminIP(hr)
	if s := hr.settings["vm_skip"]; s != nil {
		hr.skip, _ = a.r.val(h.Name, s).boolean(s.Value, "")
	}
	a.name(hr)
	if hr.skip {
		return hr
	}
	n := &hr.node
	n.Address = h.Name
	if hr.addrOK {
		n.MAC.Management, n.MAC.Private = MACs(hr.addr)
	}
	n.Image = a.image(hr)
	a.sizes(hr)
	a.arch(hr)
	a.login(hr)
	n.Disks = a.disks(hr)
	n.Aliases = a.aliases(hr)
	n.Shares = a.shares(hr)
	return hr
}

// settings resolves every consumed key for host h as Ansible does; an
// ambiguous key is a problem at its definition and absent.
func (a *analysis) settings(h *host) map[string]*setting {
	out := map[string]*setting{}
	groups := a.m.hostGroups(h)
	for _, k := range ConsumedKeys() {
		res := a.resolve(h, groups, k)
		if res.ambiguity != nil {
			res.pick.def.src.at(res.pick.def.Value, *res.ambiguity)
			continue
		}
		if res.pick != nil {
			out[k] = res.pick.setting()
		}
	}
	return out
}

// address reads the host key as the node's IPv4 address.
func (a *analysis) address(hr *hostResult) {
	h := hr.h
	ip, err := netip.ParseAddr(h.Name)
	if err == nil && ip.Is4() {
		hr.addr, hr.addrOK = ip, true
		return
	}
	hint := "host keys must be IPv4 addresses such as 10.10.10.11"
	if strings.Contains(h.Name, ":") && !strings.Contains(h.Name, "::") {
		hint = "write the address without a port"
	}
	h.src.at(h.Node, Problem{Host: h.Name, Message: "is not an IPv4 address", Hint: hint})
}

// adminIP reads admin_ip, when set, as an IPv4 address.
func (a *analysis) adminIP(hr *hostResult) {
	s := hr.settings["admin_ip"]
	if s == nil {
		return
	}
	v := a.r.val(hr.h.Name, s)
	if str, ok := v.str(s.Value, ""); ok {
		if ip, err := netip.ParseAddr(str); err != nil || !ip.Is4() {
			v.fail(s.Value, "", "is not an IPv4 address", "write a dotted quad such as 10.10.10.10")
		} else {
			hr.adminIP = ip
		}
	}
}

// sizes reads vm_cpu, vm_mem (MiB) and vm_disk (GiB) within spec's limits.
func (a *analysis) sizes(hr *hostResult) {
	n := &hr.node
	n.CPUs = int(a.intSetting(hr, "vm_cpu", DefaultCPUs, spec.MinCPUs, spec.MaxCPUs))
	n.MemoryBytes = a.sizeSetting(hr, "vm_mem", DefaultMemoryMiB<<20, 1<<20, "MiB")
	if s := hr.settings["vm_mem"]; s != nil && n.MemoryBytes > 0 {
		a.check(hr, s, spec.CheckMemory(n.MemoryBytes))
	}
	n.RootDiskBytes = a.sizeSetting(hr, "vm_disk", DefaultDiskGiB<<30, 1<<30, "GiB")
	if s := hr.settings["vm_disk"]; s != nil && n.RootDiskBytes > 0 {
		a.check(hr, s, spec.CheckDiskSize(n.RootDiskBytes))
	}
}

// arch reads vm_arch (default DefaultArch) with spec.ParseArch: any case,
// aliases read as Barn's names.
func (a *analysis) arch(hr *hostResult) {
	hr.arch = DefaultArch
	s := hr.settings["vm_arch"]
	if s == nil {
		return
	}
	v := a.r.val(hr.h.Name, s)
	if str, ok := v.str(s.Value, ""); ok {
		// any case; x86_64/x64 and aarch64/a64 are read as amd64 and arm64.
		if arch, viol := spec.ParseArch(str); viol != nil {
			v.fail(s.Value, "", viol.Problem, viol.Hint)
		} else {
			hr.arch = arch
		}
	}
}

// login reads node_admin_username and node_admin_uid (Pigsty's dba user
// always has DbaUID).
func (a *analysis) login(hr *hostResult) {
	hr.user, hr.uid = DefaultUser, 0
	if s := hr.settings["node_admin_username"]; s != nil {
		v := a.r.val(hr.h.Name, s)
		if str, ok := v.str(s.Value, ""); ok {
			if viol := spec.CheckUserName(str); viol != nil {
				v.fail(s.Value, "", viol.Problem, viol.Hint)
			} else {
				hr.user = str
			}
		}
	}
	if s := hr.settings["node_admin_uid"]; s != nil {
		v := a.r.val(hr.h.Name, s)
		if uid, ok := v.integer(s.Value, "", 1, 1<<31-2); ok {
			hr.uid, hr.uidSet = uid, true
			if viol := spec.CheckUID(hr.user, int(uid)); viol != nil {
				v.fail(s.Value, "", viol.Problem, viol.Hint)
			}
		}
	}
	if hr.user == DefaultUser {
		hr.uid = DbaUID
	}
}

// check reports viol (a spec rule's verdict on setting s of host hr), if
// any, at s's value.
func (a *analysis) check(hr *hostResult, s *setting, viol *spec.Violation) {
	if viol != nil {
		a.r.val(hr.h.Name, s).fail(s.Value, "", viol.Problem, viol.Hint)
	}
}

// name derives the node name: nodename (its first label when it is a
// fully qualified name, which then becomes the node's FQDN), else
// <pg_cluster>-<pg_seq>, else node-<last octet>.
func (a *analysis) name(hr *hostResult) {
	r, h := a.r, hr.h
	last := "x"
	if hr.addrOK {
		last = fmt.Sprint(hr.addr.As4()[3])
	}
	var seq int64
	var cluster string
	var clusterOK, seqOK bool
	if s := hr.settings["pg_seq"]; s != nil {
		seq, seqOK = r.val(h.Name, s).integer(s.Value, "", 0, 1<<31-1)
	}
	if s := hr.settings["pg_cluster"]; s != nil {
		cluster, clusterOK = r.val(h.Name, s).str(s.Value, "")
	}
	if s := hr.settings["nodename"]; s != nil {
		v := r.val(h.Name, s)
		if str, ok := v.str(s.Value, ""); ok && str != "" {
			hr.nameFrom = "nodename"
			name, fqdn, problem := SplitNodename(str)
			hr.node.Name, hr.node.FQDN = name, fqdn
			if problem != "" && !hr.skip {
				v.fail(s.Value, "", problem, "write a lower-case DNS name: labels of 1–63 a-z 0-9 and -, not starting or ending with -, e.g. pg-meta-1 or pigsty.cc")
			}
			return
		} else if !ok {
			hr.node.Name = "node-" + last
			return
		}
	}
	if clusterOK && seqOK {
		hr.nameFrom = "pg_cluster-pg_seq"
		hr.node.Name = fmt.Sprintf("%s-%d", cluster, seq)
		if !validNodeName(hr.node.Name) && !hr.skip {
			s := hr.settings["pg_cluster"]
			r.val(h.Name, s).fail(s.Value, "", fmt.Sprintf("derived node name %q is invalid", hr.node.Name), "set nodename explicitly (1–63 of a-z 0-9 and -)")
		}
		return
	}
	hr.nameFrom = "address"
	hr.node.Name = "node-" + last
}

func (a *analysis) intSetting(hr *hostResult, key string, def, lo, hi int64) int64 {
	s := hr.settings[key]
	if s == nil {
		return def
	}
	i, _ := a.r.val(hr.h.Name, s).integer(s.Value, "", lo, hi)
	return i
}

func (a *analysis) sizeSetting(hr *hostResult, key string, def, unit int64, unitName string) int64 {
	s := hr.settings[key]
	if s == nil {
		return def
	}
	b, _ := a.r.val(hr.h.Name, s).size(s.Value, "", unit, unitName)
	return b
}

// image canonicalises vm_image/vm_version: "d12" → "d12:stable",
// "d12@12" stays, vm_image d12 + vm_version "12.1" → "d12@12.1"; no
// vm_image → DefaultImage, vm_version "12.1" alone → "@12.1".
func (a *analysis) image(hr *hostResult) string {
	r, h := a.r, hr.h
	img := ""
	is := hr.settings["vm_image"]
	if is != nil {
		v := r.val(h.Name, is)
		str, ok := v.str(is.Value, "")
		if !ok {
			return ""
		}
		img = strings.TrimSpace(str)
		family, rest := img, ""
		if i := strings.IndexAny(img, ":@"); i >= 0 {
			family, rest = img[:i], img[i:]
		}
		switch {
		case !reFamily.MatchString(family):
			v.fail(is.Value, "", "invalid image selector", "write family, family:channel or family@version, e.g. d12 or d12:stable")
			return ""
		case strings.HasPrefix(rest, ":") && !reChannel.MatchString(rest[1:]):
			v.fail(is.Value, "", "invalid image channel", "write family:channel, e.g. d12:stable")
			return ""
		case strings.HasPrefix(rest, "@") && !reVersion.MatchString(rest[1:]):
			v.fail(is.Value, "", "invalid image version", "write family@version, e.g. d12@12")
			return ""
		}
	}
	if vs := hr.settings["vm_version"]; vs != nil {
		v := r.val(h.Name, vs)
		sc, ok := v.scalar(vs.Value, "", "a version")
		if !ok {
			return ""
		}
		switch {
		case sc.Kind == yamlStr || (sc.Kind == yamlInt && sc.Canonical()) || (sc.Kind == yamlFloat && sc.Canonical()):
		case sc.Kind == yamlFloat || sc.Kind == yamlInt:
			v.fail(vs.Value, "", fmt.Sprintf("YAML 1.1 (Ansible) reads %s as the number %v", sc.Spelling, sc.Value()), fmt.Sprintf("quote it: %q", sc.Spelling))
			return ""
		default:
			v.fail(vs.Value, "", fmt.Sprintf("must be a version, not a %s", sc.Kind), `quote it, e.g. "12.1"`)
			return ""
		}
		ver := strings.TrimSpace(sc.Spelling)
		if ver == "" || !reVersion.MatchString(ver) {
			v.fail(vs.Value, "", "invalid version", `write a version such as "12" or "12.1"`)
			return ""
		}
		if strings.ContainsAny(img, ":@") {
			v.fail(vs.Value, "", fmt.Sprintf("cannot be combined with vm_image %q, which already selects a channel or version", img), "set vm_image to the family only, e.g. d12")
			return ""
		}
		if img == "" {
			img = strings.Split(DefaultImage, ":")[0]
		}
		return img + "@" + ver
	}
	switch {
	case img == "":
		return DefaultImage
	case strings.HasPrefix(img, "local-") || strings.ContainsAny(img, ":@"):
		return img
	}
	return img + ":stable"
}

func (a *analysis) disks(hr *hostResult) []spec.Disk {
	s := hr.settings["vm_disks"]
	if s == nil {
		return []spec.Disk{{Name: "data", Mount: "/data", SizeBytes: DefaultDataGiB << 30, FS: "auto", Serial: DiskSerial(hr.node.Name, "data")}}
	}
	v := a.r.val(hr.h.Name, s)
	items, ok := v.list(s.Value, "", "[{path: /data, size: 128GiB}] or [] for none")
	if !ok {
		return []spec.Disk{}
	}
	out := []spec.Disk{}
	for _, it := range items {
		d, pn, ok := dataDisk(v, it)
		if !ok {
			continue
		}
		bad := false
		for _, o := range out {
			if overlaps(o.Mount, d.Mount) || o.Name == d.Name {
				v.fail(pn, "vm_disks.path", fmt.Sprintf("overlaps data disk %s", o.Mount), "give each disk its own, non-nested mount")
				bad = true
			}
		}
		if bad {
			continue
		}
		d.Serial = DiskSerial(hr.node.Name, d.Name)
		out = append(out, d)
	}
	return out
}

// dataDisk reads one vm_disks item it: the disk, its path node (where an
// overlap is reported) and false when the item is unusable.
func dataDisk(v *val, it *yaml.Node) (spec.Disk, *yaml.Node, bool) {
	d := spec.Disk{SizeBytes: DefaultDataGiB << 30, FS: "auto"}
	f, ok := v.fields(it, "", []string{"path", "size", "fs", "persistent"})
	if !ok {
		return d, nil, false
	}
	pn := f["path"]
	if pn == nil {
		v.fail(it, "", "a data disk needs a path", "write {path: /data}")
		return d, nil, false
	}
	p, ok := v.str(pn, "vm_disks.path")
	if !ok {
		return d, nil, false
	}
	d.Mount, d.Name = p, diskName(p)
	if viol := cmp.Or(spec.CheckGuestPath(p), spec.CheckDiskName(d.Name)); viol != nil {
		v.fail(pn, "vm_disks.path", viol.Problem, viol.Hint)
		return d, nil, false
	}
	if sn := f["size"]; sn != nil {
		if b, ok := v.size(sn, "vm_disks.size", 1<<30, "GiB"); ok {
			if viol := spec.CheckDiskSize(b); viol != nil {
				v.fail(sn, "vm_disks.size", viol.Problem, viol.Hint)
			}
			d.SizeBytes = b
		}
	}
	if fn := f["fs"]; fn != nil {
		if fs, ok := v.str(fn, "vm_disks.fs"); ok {
			if viol := spec.CheckFS(fs); viol != nil {
				v.fail(fn, "vm_disks.fs", viol.Problem, viol.Hint)
			} else {
				d.FS = fs
			}
		}
	}
	if viol := spec.CheckDataDiskFits(d.SizeBytes, d.FS); viol != nil && spec.CheckDiskSize(d.SizeBytes) == nil {
		at := cmp.Or(f["size"], f["fs"], it)
		v.fail(at, "vm_disks.size", viol.Problem, viol.Hint)
	}
	if bn := f["persistent"]; bn != nil {
		d.Persistent, _ = v.boolean(bn, "vm_disks.persistent")
	}
	return d, pn, true
}

func (a *analysis) aliases(hr *hostResult) []string {
	s := hr.settings["vm_alias"]
	out := []string{}
	if s == nil {
		return out
	}
	v := a.r.val(hr.h.Name, s)
	items, ok := v.list(s.Value, "", "[db.lab, pg.lab]")
	if !ok {
		return out
	}
	for _, it := range items {
		str, ok := v.str(it, "vm_alias")
		if !ok {
			continue
		}
		if viol := spec.CheckAlias(str); viol != nil {
			v.fail(it, "vm_alias", viol.Problem, viol.Hint)
			continue
		}
		out = append(out, str)
	}
	return out
}

func (a *analysis) shares(hr *hostResult) []spec.Share {
	s := hr.settings["vm_shares"]
	out := []spec.Share{}
	if s == nil {
		return out
	}
	v := a.r.val(hr.h.Name, s)
	items, ok := v.list(s.Value, "", "[{host: /srv/src, guest: /src}]")
	if !ok {
		return out
	}
	if len(items) > MaxShares {
		v.fail(s.Value, "", fmt.Sprintf("%d shares; at most %d per node", len(items), MaxShares), "merge shares into fewer directories")
		return out
	}
	for _, it := range items {
		sh, hn, gn, ok := share(v, it)
		if !ok {
			continue
		}
		hp, gp := sh.Host, sh.Guest
		bad := false
		for _, d := range hr.node.Disks {
			if overlaps(d.Mount, gp) {
				v.fail(gn, "vm_shares.guest", fmt.Sprintf("overlaps data disk mount %s", d.Mount), "share into another directory")
				bad = true
			}
		}
		for _, o := range out {
			if overlaps(o.Guest, gp) {
				v.fail(gn, "vm_shares.guest", fmt.Sprintf("overlaps share target %s", o.Guest), "give each share its own, non-nested target")
				bad = true
			} else if overlaps(o.Host, hp) {
				v.fail(hn, "vm_shares.host", fmt.Sprintf("overlaps share source %s on the same node", o.Host), "share the common parent once")
				bad = true
			}
		}
		if bad {
			continue
		}
		sh.Tag = ShareTag(hp, gp, sh.Readonly)
		out = append(out, sh)
	}
	return out
}

// share reads one vm_shares item it: the share (read-only unless it says
// otherwise), its host and guest path nodes (where overlaps are reported)
// and false when the item is unusable.
func share(v *val, it *yaml.Node) (spec.Share, *yaml.Node, *yaml.Node, bool) {
	sh := spec.Share{Readonly: true}
	f, ok := v.fields(it, "", []string{"host", "guest", "readonly"})
	if !ok {
		return sh, nil, nil, false
	}
	hn, gn := f["host"], f["guest"]
	if hn == nil || gn == nil {
		v.fail(it, "", "a share needs host and guest paths", "write {host: /srv/src, guest: /src}")
		return sh, nil, nil, false
	}
	hp, ok1 := v.str(hn, "vm_shares.host")
	gp, ok2 := v.str(gn, "vm_shares.guest")
	if !ok1 || !ok2 {
		return sh, nil, nil, false
	}
	if viol := spec.CheckHostPath(hp); viol != nil {
		v.fail(hn, "vm_shares.host", viol.Problem, viol.Hint)
		return sh, nil, nil, false
	}
	if viol := spec.CheckGuestPath(gp); viol != nil {
		v.fail(gn, "vm_shares.guest", viol.Problem, viol.Hint)
		return sh, nil, nil, false
	}
	if rn := f["readonly"]; rn != nil {
		sh.Readonly, _ = v.boolean(rn, "vm_shares.readonly")
	}
	sh.Host, sh.Guest = hp, gp
	return sh, hn, gn, true
}

// deployment runs the whole-inventory checks and builds the spec.
func (a *analysis) deployment() {
	managed, skipped, ok := a.partition()
	if !ok {
		return
	}
	a.limitNodes(managed)
	cidr := a.subnet(managed)
	// Per-deployment agreement: arch, user, uid.
	a.agreeAll(managed, "vm_arch", func(hr *hostResult) string { return hr.arch }, "define it once in all.vars")
	a.agreeAll(managed, "node_admin_username", func(hr *hostResult) string { return hr.user }, "define it once in all.vars; Barn has one login user for all nodes")
	a.agreeAll(managed, "node_admin_uid", func(hr *hostResult) string { return fmt.Sprint(hr.uid) }, "define it once in all.vars")
	a.uniqueNames(managed)
	a.sshOverlaps(managed, "/home/"+managed[0].user+"/.ssh")
	a.sharedSources(managed)
	if !a.r.probs.empty() {
		return
	}
	a.build(managed, skipped, cidr)
}

// partition splits the hosts with a valid address into managed and
// skipped (vm_skip) ones; ok is false, after a problem where one is due,
// when no host is managed.
func (a *analysis) partition() (managed, skipped []*hostResult, ok bool) {
	for _, hr := range a.hosts {
		if !hr.addrOK {
			continue
		}
		if hr.skip {
			skipped = append(skipped, hr)
		} else {
			managed = append(managed, hr)
		}
	}
	switch {
	case len(a.hosts) == 0:
		a.r.fileProblem("the inventory has no hosts", "list hosts under all.children.<group>.hosts, e.g. 10.10.10.10: {}")
		return nil, nil, false
	case len(managed) == 0 && len(skipped) == len(a.hosts):
		a.r.fileProblem("every host sets vm_skip: true; at least one managed host is required", "remove vm_skip from one host")
		return nil, nil, false
	case len(managed) == 0:
		return nil, nil, false
	}
	return managed, skipped, true
}

// limitNodes refuses more than MaxNodes managed hosts, at the first one
// over the limit.
func (a *analysis) limitNodes(managed []*hostResult) {
	if len(managed) <= MaxNodes {
		return
	}
	var extra []string
	for _, hr := range managed[MaxNodes:] {
		extra = append(extra, hr.h.Name)
	}
	managed[MaxNodes].h.src.at(managed[MaxNodes].h.Node, Problem{
		Message: fmt.Sprintf("%d managed hosts; at most %d are allowed (over the limit: %s)", len(managed), MaxNodes, strings.Join(extra, ", ")),
		Hint:    "mark the extra hosts vm_skip: true or split the inventory"})
}

// uniqueNames refuses a node name, FQDN or alias that two managed hosts
// claim, at the second claim's setting (or host).
func (a *analysis) uniqueNames(managed []*hostResult) {
	type owner struct {
		hr         *hostResult
		kind, from string
	}
	seen := map[string]owner{}
	claim := func(name string, o owner, s *setting) {
		prev, dup := seen[name]
		if !dup {
			seen[name] = o
			return
		}
		msg := fmt.Sprintf("%s %q (%s) is also the %s of host %s (%s)", o.kind, name, o.from, prev.kind, prev.hr.h.Name, prev.from)
		if s != nil {
			o.hr.h.src.val(o.hr.h.Name, s).fail(s.Value, "", msg, "names, FQDNs and aliases must be unique across the deployment")
			return
		}
		o.hr.h.src.at(o.hr.h.Node, Problem{Host: o.hr.h.Name, Value: name, Message: msg, Hint: "set a unique nodename on one of them"})
	}
	for _, hr := range managed {
		claim(hr.node.Name, owner{hr, "node name", nameSource(hr)}, hr.nameSetting())
	}
	for _, hr := range managed {
		if hr.node.FQDN != "" {
			claim(hr.node.FQDN, owner{hr, "FQDN", nameSource(hr)}, hr.settings["nodename"])
		}
	}
	for _, hr := range managed {
		for _, al := range hr.node.Aliases {
			claim(al, owner{hr, "alias", "vm_alias at " + where(hr.settings["vm_alias"])}, hr.settings["vm_alias"])
		}
	}
}

// sshOverlaps refuses data disks and share targets that overlap the login
// user's ~/.ssh (ssh).
func (a *analysis) sshOverlaps(managed []*hostResult, ssh string) {
	for _, hr := range managed {
		for _, d := range hr.node.Disks {
			if overlaps(d.Mount, ssh) {
				s := hr.settings["vm_disks"]
				a.r.val(hr.h.Name, s).fail(s.Value, "", fmt.Sprintf("data disk %s overlaps %s", d.Mount, ssh), "mount data disks elsewhere, e.g. /data")
			}
		}
		for _, sh := range hr.node.Shares {
			if overlaps(sh.Guest, ssh) {
				s := hr.settings["vm_shares"]
				a.r.val(hr.h.Name, s).fail(s.Value, "", fmt.Sprintf("share target %s overlaps %s", sh.Guest, ssh), "share into another directory")
			}
		}
	}
}

// sharedSources refuses host share sources of different nodes that
// overlap unless all of them are read-only.
func (a *analysis) sharedSources(managed []*hostResult) {
	type src struct {
		hr *hostResult
		sh spec.Share
	}
	var srcs []src
	for _, hr := range managed {
		for _, sh := range hr.node.Shares {
			for _, o := range srcs {
				if o.hr != hr && overlaps(o.sh.Host, sh.Host) && !(o.sh.Readonly && sh.Readonly) {
					s := hr.settings["vm_shares"]
					a.r.val(hr.h.Name, s).fail(s.Value, "", fmt.Sprintf("host source %s overlaps %s shared by host %s, and not all of them are read-only", sh.Host, o.sh.Host, o.hr.h.Name), "make the overlapping shares readonly: true")
				}
			}
			srcs = append(srcs, src{hr, sh})
		}
	}
}

// build seals the spec of the checked managed and skipped hosts on cidr
// (nodes and skipped hosts in address order) into a.spec.
func (a *analysis) build(managed, skipped []*hostResult, cidr string) {
	sort.Slice(managed, func(i, j int) bool { return managed[i].addr.Less(managed[j].addr) })
	control := a.control(managed)
	p := netip.MustParsePrefix(cidr)
	b := p.Addr().As4()
	at := func(last byte) string { return netip.AddrFrom4([4]byte{b[0], b[1], b[2], last}).String() }
	s := &spec.Spec{
		Schema: spec.Schema,
		Source: a.sources(),
		Deployment: spec.Deployment{
			Name:   spec.DeploymentName,
			Arch:   managed[0].arch,
			Image:  DefaultImage,
			Subnet: spec.Subnet{CIDR: cidr, Host: at(1), Reserved: at(2) + "-" + at(8), Pool: at(9) + "-" + at(254)},
			User:   spec.User{Name: managed[0].user, UID: int(managed[0].uid)},
		},
		Nodes:   []spec.Node{},
		Skipped: []spec.Skipped{},
	}
	for _, hr := range managed {
		n := hr.node
		n.Control = hr == control
		s.Nodes = append(s.Nodes, n)
	}
	sort.Slice(skipped, func(i, j int) bool { return skipped[i].addr.Less(skipped[j].addr) })
	for _, hr := range skipped {
		s.Skipped = append(s.Skipped, spec.Skipped{Name: hr.node.Name, Address: hr.h.Name})
	}
	s.Control = control.node.Name
	if cidr != DefaultCIDR {
		a.warnings = append(a.warnings, Warning{Code: "non_default_subnet", Value: cidr,
			Message: fmt.Sprintf("using the non-default Barn network %s; the installed network (barn-net) and every node address must use it", cidr)})
	}
	a.warnings = append(a.warnings, a.interfaceWarnings(managed)...)
	s.Warnings = a.warnings
	s.Seal()
	if err := s.Validate(); err != nil { // every rule was checked at its key above
		a.r.fileProblem("the resolved spec breaks a rule Barn failed to check at its key: "+err.Error(), err.Hint)
		return
	}
	a.spec = s
}

// control picks the control node: the managed host at admin_ip, as
// Ansible resolves admin_ip for the managed hosts. Pigsty lets hosts
// override it (each build host of Pigsty's build/dev.yml is its own
// admin); then the address most hosts name wins, ties to the lowest, and a
// warning says so. Without a managed admin_ip it is the lowest managed
// address.
func (a *analysis) control(managed []*hostResult) *hostResult {
	votes := map[netip.Addr]int{}
	var named []netip.Addr
	var first *setting
	for _, hr := range managed {
		if ip := hr.adminIP; ip.IsValid() {
			if votes[ip] == 0 {
				named = append(named, ip)
			}
			votes[ip]++
			if first == nil {
				first = hr.settings["admin_ip"]
			}
		}
	}
	if len(named) == 0 {
		return managed[0]
	}
	sort.Slice(named, func(i, j int) bool {
		if votes[named[i]] != votes[named[j]] {
			return votes[named[i]] > votes[named[j]]
		}
		return named[i].Less(named[j])
	})
	byAddr := map[netip.Addr]*hostResult{}
	for _, hr := range managed {
		byAddr[hr.addr] = hr
	}
	var control *hostResult
	for _, ip := range named {
		if hr := byAddr[ip]; hr != nil {
			control = hr
			break
		}
	}
	if control == nil {
		control = managed[0]
		a.warnings = append(a.warnings, Warning{Code: "admin_ip_not_managed", Key: "admin_ip", Value: named[0].String(), File: first.src.file, Line: first.Value.Line,
			Message: fmt.Sprintf("admin_ip %s is not a managed host; the control node is %s, the lowest managed address", named[0], control.node.Name)})
		return control
	}
	if len(named) > 1 {
		var parts []string
		for _, ip := range named {
			parts = append(parts, fmt.Sprintf("%s (%d %s)", ip, votes[ip], plural(votes[ip], "host", "hosts")))
		}
		a.warnings = append(a.warnings, Warning{Code: "admin_ip_differs", Key: "admin_ip", Value: control.h.Name,
			Message: fmt.Sprintf("admin_ip differs between hosts: %s; the control node is %s, the managed admin_ip most hosts name (ties: the lowest address)", strings.Join(parts, ", "), control.node.Name)})
	}
	return control
}

// nameSetting is the setting the node name is derived from (nil for
// names derived from the address).
func (hr *hostResult) nameSetting() *setting {
	switch hr.nameFrom {
	case "nodename":
		return hr.settings["nodename"]
	case "pg_cluster-pg_seq":
		return hr.settings["pg_cluster"]
	}
	return nil
}

// nameSource says where a node name comes from, for collision messages:
// `nodename "pigsty.cc" at demo.yml:20`.
func nameSource(hr *hostResult) string {
	switch hr.nameFrom {
	case "nodename":
		s := hr.settings["nodename"]
		return fmt.Sprintf("nodename %q at %s", written(s.Value), where(s))
	case "pg_cluster-pg_seq":
		c, q := hr.settings["pg_cluster"], hr.settings["pg_seq"]
		return fmt.Sprintf("pg_cluster at %s, pg_seq at %s", where(c), where(q))
	}
	return "derived from its address"
}

// where is file:line of a setting's value.
func where(s *setting) string {
	if s == nil || s.src == nil || s.Value == nil {
		return "?"
	}
	return fmt.Sprintf("%s:%d", s.src.file, s.Value.Line)
}

// agreeAll refuses a deployment-wide value that differs between hosts,
// naming where each value is set.
func (a *analysis) agreeAll(managed []*hostResult, key string, get func(*hostResult) string, hint string) {
	byVal := map[string][]string{}
	from := map[string]*setting{}
	var order []string
	for _, hr := range managed {
		v := get(hr)
		if _, ok := byVal[v]; !ok {
			order = append(order, v)
			from[v] = hr.settings[key]
		}
		byVal[v] = append(byVal[v], hr.h.Name)
	}
	if len(order) < 2 {
		return
	}
	var parts []string
	for _, v := range order {
		src := "the default"
		if s := from[v]; s != nil {
			src = where(s)
		}
		parts = append(parts, fmt.Sprintf("%s on %s (%s)", v, strings.Join(byVal[v], ", "), src))
	}
	var at *setting
	hostName := ""
	for _, hr := range managed {
		if s := hr.settings[key]; s != nil {
			at, hostName = s, hr.h.Name
			break
		}
	}
	p := Problem{Host: hostName, Key: key, Message: "must resolve to one value for the whole deployment, but resolves to " + strings.Join(parts, "; "), Hint: hint}
	if at == nil {
		a.r.at(nil, p)
		return
	}
	p.Value = written(at.Value)
	at.src.at(at.Value, p)
}

// subnet checks that every managed host is in one canonical RFC1918 /24
// and in its .9–.254 pool, and returns that /24.
func (a *analysis) subnet(managed []*hostResult) string {
	byNet := map[netip.Prefix][]*hostResult{}
	var order []netip.Prefix
	for _, hr := range managed {
		p := netip.PrefixFrom(hr.addr, 24).Masked()
		if _, ok := byNet[p]; !ok {
			order = append(order, p)
		}
		byNet[p] = append(byNet[p], hr)
	}
	main := order[0]
	for _, p := range order {
		if len(byNet[p]) > len(byNet[main]) {
			main = p
		}
	}
	if len(order) > 1 {
		var parts, outliers []string
		var first *hostResult
		for _, p := range order {
			parts = append(parts, fmt.Sprintf("%s (%d %s)", p, len(byNet[p]), plural(len(byNet[p]), "host", "hosts")))
			if p == main {
				continue
			}
			for _, hr := range byNet[p] {
				outliers = append(outliers, hr.h.Name)
				if first == nil {
					first = hr
				}
			}
		}
		first.h.src.at(first.h.Node, Problem{
			Message: fmt.Sprintf("all managed hosts must share one /24; the inventory spans %s; outliers: %s", strings.Join(parts, ", "), strings.Join(outliers, ", ")),
			Hint:    fmt.Sprintf("move the outliers into %s or mark them vm_skip: true", main)})
	}
	a4 := main.Addr().As4()
	private := a4[0] == 10 || (a4[0] == 172 && a4[1] >= 16 && a4[1] <= 31) || (a4[0] == 192 && a4[1] == 168)
	if !private {
		hr := byNet[main][0]
		hr.h.src.at(hr.h.Node, Problem{Message: fmt.Sprintf("the managed hosts' network %s is not private (RFC 1918)", main), Hint: "use 10.x, 172.16–31.x or 192.168.x addresses, e.g. 10.10.10.0/24"})
	}
	for _, hr := range byNet[main] {
		last := hr.addr.As4()[3]
		msg := ""
		switch {
		case last == 0:
			msg = "is the network address of " + main.String()
		case last == 255:
			msg = "is the broadcast address of " + main.String()
		case last == 1:
			msg = "is the host (gateway) address"
		case last <= 8:
			msg = "is reserved (.2–.8)"
		}
		if msg != "" {
			hr.h.src.at(hr.h.Node, Problem{Host: hr.h.Name, Message: msg + "; it cannot be a node address", Hint: "nodes use .9–.254"})
		}
	}
	return main.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// interfaceWarnings reports the guest NIC names Pigsty will use for its
// VIPs when they are not Pigsty's "auto": vip_interface when vip_enabled,
// pg_vip_interface when pg_vip_enabled (Pigsty's roles/node/tasks/vip.yml
// and roles/pgsql/tasks/vip.yml). Pigsty reads
// `x | default('auto', true) | string | trim | lower` and, for ” or
// 'auto', picks the NIC that holds the node's inventory address, which on
// a Barn guest is the private NIC: nothing to warn about. A named NIC must
// exist in the guest, and Barn does not name NICs (the image does), so
// barn-plan checks it. Both keys are opaque: resolved like every other
// variable, never hashed, never refused.
func (a *analysis) interfaceWarnings(managed []*hostResult) []Warning {
	type kv struct{ key, value string }
	nodes := map[kv][]string{}
	at := map[kv]*setting{}
	var order []kv
	for _, hr := range managed {
		groups := a.m.hostGroups(hr.h)
		for _, pair := range [][2]string{{"pg_vip_enabled", "pg_vip_interface"}, {"vip_enabled", "vip_interface"}} {
			if !pigstyEnabled(a.opaque(hr.h, groups, pair[0])) {
				continue
			}
			s := a.opaque(hr.h, groups, pair[1])
			name, named := pigstyInterface(s)
			if !named {
				continue
			}
			k := kv{pair[1], name}
			if _, ok := nodes[k]; !ok {
				order = append(order, k)
				at[k] = s
			}
			nodes[k] = append(nodes[k], hr.node.Name)
		}
	}
	var out []Warning
	for _, k := range order {
		s := at[k]
		out = append(out, Warning{Code: "interface_name", Key: k.key, Value: k.value, Nodes: nodes[k], File: s.src.file, Line: s.Value.Line,
			Message: fmt.Sprintf("%s = %s names a guest NIC; Barn does not rename NICs (the image names them), so barn-plan checks it; %s: auto lets Pigsty pick the NIC that holds the node's address", k.key, k.value, k.key)})
	}
	return out
}

// opaque resolves a variable Barn does not own: Ansible's pick, ambiguity
// ignored.
func (a *analysis) opaque(h *host, groups []*group, key string) *setting {
	res := a.resolve(h, groups, key)
	if res.pick == nil {
		return nil
	}
	return res.pick.setting()
}

// pigstyEnabled is Ansible's `| bool` filter (to_bool) of a Pigsty switch
// that defaults to false: true, 'yes', 'on', '1', 'true' (any case) and 1
// are true. A Jinja expression counts as possibly true.
func pigstyEnabled(s *setting) bool {
	if s == nil || s.Value == nil || s.Value.Kind != yaml.ScalarNode {
		return false
	}
	sc := scalarOf(s.Value)
	switch sc.Kind {
	case yaml11.Bool:
		return sc.Bool
	case yaml11.Int:
		return sc.Int == 1
	case yaml11.Float:
		return sc.Float == 1
	case yaml11.Str:
		if hasJinja(sc.Spelling) {
			return true
		}
		switch strings.ToLower(sc.Spelling) {
		case "yes", "on", "1", "true":
			return true
		}
	}
	return false
}

// pigstyInterface reads a Pigsty VIP interface the way Pigsty does:
// `default('auto', true) | string | trim | lower` in [”, 'auto'] means
// auto; anything else names a NIC, `string | trim`.
func pigstyInterface(s *setting) (string, bool) {
	if s == nil || s.Value == nil || falsy(s.src, s.Value) {
		return "", false
	}
	v := s.Value
	if v.Kind != yaml.ScalarNode {
		return written(v), true
	}
	name := strings.TrimSpace(fmt.Sprint(scalarOf(v).Value()))
	if sc := scalarOf(v); sc.Kind == yaml11.Bool {
		name = map[bool]string{true: "True", false: "False"}[sc.Bool] // Python's str(True)
	}
	if l := strings.ToLower(name); l == "" || l == "auto" {
		return "", false
	}
	return name, true
}
