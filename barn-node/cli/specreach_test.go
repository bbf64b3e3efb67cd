package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
	"github.com/rogpeppe/go-internal/testscript"

	"barn.dev/lib/cidata"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/imagecache"
	"barn.dev/lib/imageref"
	"barn.dev/lib/inventory"
	"barn.dev/lib/plan"
	"barn.dev/lib/spec"
	"barn.dev/lib/state"
	"barn.dev/lib/vmrecord"
	"barn.dev/lib/wire"
)

// Where a spec field must show once barn-node applied it.
const (
	toSeed  = "seed"  // the node's NoCloud seed (user-data, meta-data, network-config)
	toArgv  = "argv"  // the recorded QEMU argv
	toState = "state" // the committed node state, beyond its copy of the spec
	toDisk  = "disk"  // the node's disk files as qemu-img reads them (sizes, backing file)
	toFDs   = "fds"   // what the running QEMU's inherited descriptors point at
	toImage = "image" // the exact image barn-plan resolves for the node (its root disk's base)
)

// reachCase is one row of the spec → guest contract: mutating the fields
// (together, when they are derived from each other) must change every
// target. exempt says why a field reaches nothing, by design.
type reachCase struct {
	fields  []string // JSON paths, [] for every element
	targets []string
	exempt  string
	mutate  func(*spec.Spec)
}

// reachTable is the contract. A spec field missing from it fails
// TestScripts/spec_reaches_guest, so a new field must say where it goes.
var reachTable = []reachCase{
	{fields: []string{"schema"}, exempt: "the document's type name"},
	{fields: []string{"source[]"}, exempt: "the files the spec was read from; not hashed, changes nothing by design"},
	{fields: []string{"deployment.name"}, exempt: "the constant deployment name"},
	{fields: []string{"skipped[].name", "skipped[].address"}, exempt: "vm_skip hosts are listed, never managed"},
	{fields: []string{"warnings[].code", "warnings[].message", "warnings[].key", "warnings[].value", "warnings[].nodes[]", "warnings[].line", "warnings[].file"},
		exempt: "resolve-time notes that barn-plan surfaces; not hashed"},
	{fields: []string{"spec_hash", "nodes[].spec_hash"}, exempt: "derived by Seal; the seed and the state carry the node hash (checked by presence)"},

	{fields: []string{"deployment.arch"}, targets: []string{toImage},
		mutate: func(s *spec.Spec) { s.Deployment.Arch = "arm64" }},
	{fields: []string{"deployment.image"}, targets: []string{toImage, toDisk, toState},
		mutate: func(s *spec.Spec) { s.Deployment.Image = "t2" }},
	{fields: []string{"deployment.subnet.cidr", "deployment.subnet.host", "deployment.subnet.reserved", "deployment.subnet.pool", "nodes[].address"},
		targets: []string{toSeed}, mutate: func(s *spec.Spec) {
			s.Deployment.Subnet = spec.Subnet{CIDR: "10.10.20.0/24", Host: "10.10.20.1", Reserved: "10.10.20.2-10.10.20.8", Pool: "10.10.20.9-10.10.20.254"}
			for i := range s.Nodes {
				s.Nodes[i].Address = strings.Replace(s.Nodes[i].Address, "10.10.10.", "10.10.20.", 1)
			}
		}},
	{fields: []string{"deployment.user.name"}, targets: []string{toSeed},
		mutate: func(s *spec.Spec) { s.Deployment.User.Name = "pgadmin" }},
	{fields: []string{"deployment.user.uid"}, targets: []string{toSeed},
		mutate: func(s *spec.Spec) { s.Deployment.User.UID = 1600 }},
	{fields: []string{"nodes[].name", "control"}, targets: []string{toSeed, toArgv, toState},
		mutate: func(s *spec.Spec) { s.Nodes[0].Name, s.Control = "r0", "r0" }},
	{fields: []string{"nodes[].control"}, targets: []string{toSeed},
		mutate: func(s *spec.Spec) { s.Nodes[0].Control, s.Nodes[1].Control, s.Control = false, true, s.Nodes[1].Name }},
	{fields: []string{"nodes[].mac.management"}, targets: []string{toSeed, toArgv},
		mutate: func(s *spec.Spec) { s.Nodes[0].MAC.Management = "0a:ba:01:77:77:77" }},
	{fields: []string{"nodes[].mac.private"}, targets: []string{toSeed}, // on the argv only with a private NIC (the lab suite)
		mutate: func(s *spec.Spec) { s.Nodes[0].MAC.Private = "0a:ba:02:77:77:77" }},
	{fields: []string{"nodes[].image"}, targets: []string{toImage, toDisk, toState},
		mutate: func(s *spec.Spec) { s.Nodes[0].Image = "t2" }},
	{fields: []string{"nodes[].cpus"}, targets: []string{toArgv},
		mutate: func(s *spec.Spec) { s.Nodes[0].CPUs = 3 }},
	{fields: []string{"nodes[].memory_bytes"}, targets: []string{toArgv},
		mutate: func(s *spec.Spec) { s.Nodes[0].MemoryBytes = 640 << 20 }},
	{fields: []string{"nodes[].root_disk_bytes"}, targets: []string{toDisk},
		mutate: func(s *spec.Spec) { s.Nodes[0].RootDiskBytes = 48 << 20 }},
	{fields: []string{"nodes[].disks[].name", "nodes[].disks[].mount"}, targets: []string{toSeed, toArgv, toState, toDisk},
		mutate: func(s *spec.Spec) { s.Nodes[0].Disks[0].Name, s.Nodes[0].Disks[0].Mount = "srv", "/srv" }},
	{fields: []string{"nodes[].disks[].size_bytes"}, targets: []string{toState, toDisk},
		mutate: func(s *spec.Spec) { s.Nodes[0].Disks[0].SizeBytes = 352 << 20 }},
	{fields: []string{"nodes[].disks[].fs"}, targets: []string{toSeed, toState},
		mutate: func(s *spec.Spec) { s.Nodes[0].Disks[0].FS = "ext4" }},
	{fields: []string{"nodes[].disks[].persistent"}, targets: []string{toState},
		mutate: func(s *spec.Spec) { s.Nodes[0].Disks[0].Persistent = true }},
	{fields: []string{"nodes[].disks[].serial"}, targets: []string{toSeed, toArgv, toState},
		mutate: func(s *spec.Spec) { s.Nodes[0].Disks[0].Serial = "zzzzzzzzzzzzzzzzzzzz" }},
	{fields: []string{"nodes[].fqdn"}, targets: []string{toSeed}, // hostname, fqdn, every guest's hosts block
		mutate: func(s *spec.Spec) { s.Nodes[0].FQDN = s.Nodes[0].Name + ".lab.internal" }},
	{fields: []string{"nodes[].aliases[]"}, targets: []string{toSeed},
		mutate: func(s *spec.Spec) { s.Nodes[0].Aliases = []string{"db.lab"} }},
	{fields: []string{"nodes[].shares[].host"}, targets: []string{toFDs},
		mutate: func(s *spec.Spec) {
			s.Nodes[0].Shares[0].Host = strings.Replace(s.Nodes[0].Shares[0].Host, "/src1", "/src2", 1)
		}},
	{fields: []string{"nodes[].shares[].guest"}, targets: []string{toSeed},
		mutate: func(s *spec.Spec) { s.Nodes[0].Shares[0].Guest = "/opt/src" }},
	{fields: []string{"nodes[].shares[].readonly"}, targets: []string{toSeed, toArgv},
		mutate: func(s *spec.Spec) { s.Nodes[0].Shares[0].Readonly = false }},
	{fields: []string{"nodes[].shares[].tag"}, targets: []string{toSeed, toArgv},
		mutate: func(s *spec.Spec) { s.Nodes[0].Shares[0].Tag = "barn-77777777777777777777" }},
}

// specLeaves lists the JSON paths of every leaf field of t ("[]" for slice
// elements), in declaration order.
func specLeaves(t reflect.Type, prefix string) []string {
	switch t.Kind() {
	case reflect.Struct:
		var out []string
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			p := name
			if prefix != "" {
				p = prefix + "." + name
			}
			out = append(out, specLeaves(f.Type, p)...)
		}
		return out
	case reflect.Slice:
		return specLeaves(t.Elem(), prefix+"[]")
	}
	return []string{prefix}
}

// reachBase is the spec every case mutates: two nodes (the second on the
// deployment's default image), a custom login user, one data disk and one
// share on the first node.
func reachBase(work string) *spec.Spec {
	s := &spec.Spec{Schema: spec.Schema, Deployment: spec.Deployment{Name: spec.DeploymentName, Arch: "native", Image: "",
		Subnet: spec.Subnet{CIDR: "10.10.10.0/24", Host: "10.10.10.1", Reserved: "10.10.10.2-10.10.10.8", Pool: "10.10.10.9-10.10.10.254"},
		User:   spec.User{Name: "admin", UID: 1500}}, Skipped: []spec.Skipped{}, Control: "r1"}
	for i, name := range []string{"r1", "r2"} {
		n := spec.Node{Name: name, Address: fmt.Sprintf("10.10.10.%d", 10+i), Control: i == 0, Image: "t1", CPUs: 1,
			MemoryBytes: 512 << 20, RootDiskBytes: 32 << 20, Disks: []spec.Disk{}, Aliases: []string{}, Shares: []spec.Share{}}
		n.MAC.Management, n.MAC.Private = fmt.Sprintf("0a:ba:01:0a:0a:%02x", 10+i), fmt.Sprintf("0a:ba:02:0a:0a:%02x", 10+i)
		s.Nodes = append(s.Nodes, n)
	}
	s.Nodes[1].Image = "" // the deployment's default image
	s.Nodes[0].Disks = []spec.Disk{{Name: "data", Mount: "/data", SizeBytes: 320 << 20, FS: "auto", Serial: inventory.DiskSerial("r1", "data")}}
	host := filepath.Join(work, "src1")
	s.Nodes[0].Shares = []spec.Share{{Host: host, Guest: "/src", Readonly: true, Tag: inventory.ShareTag(host, "/src", true)}}
	s.Seal()
	return s
}

// reachResolver resolves t1 and t2 (each its own cached base image) for
// amd64, and t1 for arm64 (plan only: nothing boots it).
type reachResolver map[string]imageref.Identity

func (r reachResolver) Resolve(selector, arch string) (imageref.Identity, error) {
	if arch == "native" {
		arch = "amd64"
	}
	if selector == "" {
		selector = "t1"
	}
	if id, ok := r[selector+"/"+arch]; ok {
		return id, nil
	}
	return imageref.Identity{}, exitcode.New(exitcode.Usage, "unknown image %s/%s", selector, arch)
}

// cmdSpecReach: `specreach` proves the spec → guest contract of
// reachTable: every field of spec.Spec has a row; for each row, the spec
// with the row's mutation is planned (barn-plan's own Compute) and
// applied by barn-node, and every target it names differs from the base
// spec's; the base's seed and state carry the node hash. The fake QEMU
// runs the nodes.
func cmdSpecReach(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: specreach")
	}
	rows := map[string]bool{}
	for _, c := range reachTable {
		for _, f := range c.fields {
			rows[f] = true
		}
	}
	leaves := specLeaves(reflect.TypeOf(spec.Spec{}), "")
	for _, l := range leaves {
		if !rows[l] {
			ts.Fatalf("spec field %s is in no row of reachTable: say where it reaches the guest (seed, argv, state, disk, fds, image) or why it reaches nothing", l)
		}
		delete(rows, l)
	}
	for f := range rows {
		ts.Fatalf("reachTable names %s, which spec.Spec does not have", f)
	}

	work := ts.Getenv("WORK")
	for _, d := range []string{"src1", "src2"} {
		ts.Check(os.MkdirAll(filepath.Join(work, d), 0o755))
	}
	home := ts.Getenv("BARN_HOME")
	t1, err := testImage(home)
	ts.Check(err)
	t2, err := reachImage(home, "t2", 24<<20)
	ts.Check(err)
	arm := t1
	arm.Arch, arm.File = "arm64", "images/t1-1-arm64.qcow2"
	r := reachResolver{"t1/amd64": t1, "t2/amd64": t2, "t1/arm64": arm}

	base := reachBase(work)
	want := reachApply(ts, r, base, false)
	for _, n := range base.Nodes {
		if !strings.Contains(want[toSeed], n.SpecHash) || !strings.Contains(want[toState], n.SpecHash) {
			ts.Fatalf("%s: the node hash is not in both its seed and its committed state", n.Name)
		}
	}
	for _, c := range reachTable {
		if c.exempt != "" {
			continue
		}
		s := reachBase(work)
		c.mutate(s)
		s.Seal()
		planOnly := len(c.targets) == 1 && c.targets[0] == toImage
		got := reachApply(ts, r, s, planOnly)
		for _, t := range c.targets {
			if normalize(got[t], s, base) == normalize(want[t], base, base) {
				ts.Fatalf("%s: the %s is the same as before the change: the field does not reach it\n%s", strings.Join(c.fields, ", "), t, got[t])
			}
		}
		fmt.Fprintf(ts.Stdout(), "%s -> %s\n", strings.Join(c.fields, ", "), strings.Join(c.targets, ", "))
	}
}

// normalize replaces s's hashes by base's, so a change shows only through
// the field itself, not through the hash every change moves.
func normalize(text string, s, base *spec.Spec) string {
	for i, n := range s.Nodes {
		text = strings.ReplaceAll(text, n.SpecHash, base.Nodes[i].SpecHash)
	}
	return strings.ReplaceAll(text, s.SpecHash, base.SpecHash)
}

// reachApply plans s, applies the plan (unless planOnly), reads every
// target, and destroys the deployment again.
func reachApply(ts *testscript.TestScript, r reachResolver, s *spec.Spec, planOnly bool) map[string]string {
	p, err := plan.Compute(plan.Input{Desired: s, Resolver: r})
	ts.Check(err)
	out := map[string]string{}
	var images []string
	for _, np := range p.Nodes {
		images = append(images, fmt.Sprintf("%s %+v", np.Name, np.Image))
	}
	out[toImage] = strings.Join(images, "\n")
	if planOnly {
		return out
	}
	b, err := wire.Marshal(p)
	ts.Check(err)
	ts.Check(os.WriteFile(ts.MkAbs("reach-plan.json"), b, 0o600))
	ts.Check(ts.Exec("sh", "-c", "barn-node apply --no-wait < reach-plan.json"))
	root, err := state.Open(ts.Getenv)
	ts.Check(err)
	var seed, argv, st, disks, fds strings.Builder
	for _, sn := range s.Nodes {
		n, err := root.ReadNode(sn.Name)
		ts.Check(err)
		seed.WriteString(readSeed(ts, n.Seed))
		argv.WriteString(strings.ReplaceAll(strings.Join(n.Invocation.Args, " "), n.VMUUID, "VMUUID") + "\n")
		for _, f := range append([]string{n.RootDisk}, dataDiskPaths(n)...) {
			info, err := exec.Command("qemu-img", "info", "--output=json", "-U", f).Output()
			ts.Check(err)
			var q struct {
				VirtualSize int64  `json:"virtual-size"`
				Backing     string `json:"backing-filename"`
			}
			ts.Check(json.Unmarshal(info, &q))
			fmt.Fprintf(&disks, "%s %d %s\n", f, q.VirtualSize, q.Backing)
		}
		for _, inh := range n.Invocation.InheritedFiles {
			target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", n.Process.PID, inh.FD))
			ts.Check(err)
			fmt.Fprintf(&fds, "%s %d %s\n", n.Node, inh.FD, target)
		}
		// The committed state beyond its spec copy, without what each
		// apply makes anew (identity, process, times) or the argv.
		c := *n
		c.Spec, c.VMUUID, c.Process, c.Invocation = spec.Node{}, "", nil, vmrecord.Invocation{}
		c.CreatedAt, c.UpdatedAt = time.Time{}, time.Time{}
		j, err := json.Marshal(c)
		ts.Check(err)
		st.Write(append(j, '\n'))
	}
	out[toSeed], out[toArgv], out[toState], out[toDisk], out[toFDs] = seed.String(), argv.String(), st.String(), disks.String(), fds.String()
	ts.Check(ts.Exec("barn-node", "destroy", "--force", "--delete-persistent"))
	return out
}

func dataDiskPaths(n *state.Node) []string {
	var out []string
	for _, d := range n.DataDisks {
		out = append(out, d.Path)
	}
	sort.Strings(out)
	return out
}

// readSeed returns the three seed files of the ISO at path, as a reader
// other than Barn's writer sees them.
func readSeed(ts *testscript.TestScript, path string) string {
	f, err := os.Open(path)
	ts.Check(err)
	defer f.Close()
	fi, err := f.Stat()
	ts.Check(err)
	fsys, err := iso9660.Read(file.New(f, true), fi.Size(), 0, 2048)
	ts.Check(err)
	var b bytes.Buffer
	for _, name := range []string{cidata.MetaDataName, cidata.UserDataName, cidata.NetworkConfigName} {
		data, err := fsys.ReadFile(name)
		ts.Check(err)
		b.Write(data)
	}
	return b.String()
}

// reachImage puts a second small base image of the given virtual size into
// the image cache (as testImage does for t1) and returns its identity.
func reachImage(home, name string, size int64) (imageref.Identity, error) {
	id, err := testImage(home)
	if err != nil {
		return id, err
	}
	id.Selector, id.Image, id.File, id.VirtualSize = name, name, "images/"+name+"-1-amd64.qcow2", size
	p := filepath.Join(home, "images", name, name+"-1-amd64.qcow2")
	if _, err := os.Stat(p); err != nil {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return id, err
		}
		if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", p, fmt.Sprint(size)).CombinedOutput(); err != nil {
			return id, fmt.Errorf("qemu-img: %v: %s", err, out)
		}
		if err := os.Chmod(p, 0o444); err != nil {
			return id, err
		}
	}
	meas, err := imagecache.MeasureFile(p)
	if err != nil {
		return id, err
	}
	id.SHA256, id.SizeBytes = meas.SHA256, meas.SizeBytes
	return id, nil
}
