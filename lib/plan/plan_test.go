package plan

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/imageref"
	"barn.dev/lib/spec"
	"barn.dev/lib/state"
	"barn.dev/lib/wire"
)

// outcomes renders the node outcomes compactly: "a=create b=unchanged".
func outcomes(p *Plan) string {
	var parts []string
	for _, n := range p.Nodes {
		s := n.Name + "=" + string(n.Outcome)
		if n.Reason != "" {
			s += "(" + n.Reason + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func mustCompute(t *testing.T, in Input) *Plan {
	t.Helper()
	p, err := Compute(in)
	if err != nil {
		t.Fatalf("Compute: %v", err)
	}
	return p
}

func wantClass(t *testing.T, err error, class exitcode.Class, reason string) *exitcode.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil, want %s/%s", class, reason)
	}
	e := exitcode.As(err)
	if e.Class != class || e.Reason != reason {
		t.Fatalf("err = %s/%s %q, want %s/%s", e.Class, e.Reason, e.Message, class, reason)
	}
	return e
}

func TestCreateWithoutDeployment(t *testing.T) {
	s := testSpec(3)
	p := mustCompute(t, Input{Desired: s, Resolver: catalog})
	if got, want := outcomes(p), "node-10=create node-11=create node-12=create"; got != want {
		t.Fatalf("outcomes = %s, want %s", got, want)
	}
	if p.Action != ActionCreate || p.Destructive {
		t.Fatalf("action = %s destructive=%t, want create/false", p.Action, p.Destructive)
	}
	if p.BasedOn != (BasedOn{}) {
		t.Fatalf("based_on = %+v, want zero", p.BasedOn)
	}
	if p.Schema != Schema || p.Spec.SpecHash != s.SpecHash {
		t.Fatalf("schema/spec not carried: %s %s", p.Schema, p.Spec.SpecHash)
	}
	if !reflect.DeepEqual(p.Images, []imageref.Identity{d12}) {
		t.Fatalf("images = %+v", p.Images)
	}
	for _, n := range p.Nodes {
		if n.Image == nil || *n.Image != d12 || n.Selector != "d12:stable" {
			t.Fatalf("node %s image = %+v selector %q", n.Name, n.Image, n.Selector)
		}
	}
	wantTotals := Totals{CPUs: 6, MemoryBytes: 12 * gib, DiskBytes: 3 * (64 + 128) * gib}
	if p.Totals.CPUs != wantTotals.CPUs || p.Totals.MemoryBytes != wantTotals.MemoryBytes || p.Totals.DiskBytes != wantTotals.DiskBytes {
		t.Fatalf("totals = %+v, want %+v", p.Totals, wantTotals)
	}
	if len(p.Totals.Disks) != 6 || p.Totals.Disks[0] != (DiskSize{Node: "node-10", Name: "root", SizeBytes: 64 * gib}) ||
		p.Totals.Disks[1] != (DiskSize{Node: "node-10", Name: "data", SizeBytes: 128 * gib}) {
		t.Fatalf("per-disk totals = %+v", p.Totals.Disks)
	}
	if !reflect.DeepEqual(p.Next, []string{"barn-inventory resolve | barn-plan | barn-node apply"}) {
		t.Fatalf("next = %q", p.Next)
	}
	if len(p.Warnings) != 0 {
		t.Fatalf("warnings = %+v, want none", p.Warnings)
	}
}

func TestUnchangedAndStart(t *testing.T) {
	s := testSpec(3)
	dep, nodes := applied(s, state.Running)
	p := mustCompute(t, Input{Desired: s, Applied: dep, Nodes: nodes, Resolver: catalog})
	if got, want := outcomes(p), "node-10=unchanged node-11=unchanged node-12=unchanged"; got != want {
		t.Fatalf("outcomes = %s, want %s", got, want)
	}
	if p.Action != ActionNone || p.Destructive || len(p.Next) != 0 {
		t.Fatalf("action = %s destructive=%t next=%q, want none/false/[]", p.Action, p.Destructive, p.Next)
	}
	if p.BasedOn != (BasedOn{Generation: 3, SpecHash: s.SpecHash}) {
		t.Fatalf("based_on = %+v", p.BasedOn)
	}

	// Liveness comes from the injected audit, not from the phase.
	p = mustCompute(t, Input{Desired: s, Applied: dep, Nodes: nodes, Resolver: catalog,
		Running: func(n *state.Node) bool { return n.Node != "node-11" }})
	if got, want := outcomes(p), "node-10=unchanged node-11=start node-12=unchanged"; got != want {
		t.Fatalf("outcomes = %s, want %s", got, want)
	}
	if p.Action != ActionStart || p.Destructive || !reflect.DeepEqual(p.Next, []string{"barn-inventory resolve | barn-plan | barn-node apply"}) {
		t.Fatalf("action = %s destructive=%t next=%q", p.Action, p.Destructive, p.Next)
	}
	if p.Nodes[1].Phase != "running" {
		t.Fatalf("phase = %q, want the committed phase", p.Nodes[1].Phase)
	}
}

func TestStoppedPhaseStartsWithoutAudit(t *testing.T) {
	s := testSpec(2)
	dep, nodes := applied(s, state.Stopped)
	nodes["node-11"].Phase = state.Stopping
	p := mustCompute(t, Input{Desired: s, Applied: dep, Nodes: nodes, Resolver: catalog})
	if got, want := outcomes(p), "node-10=start node-11=start(interrupted_transition)"; got != want {
		t.Fatalf("outcomes = %s, want %s", got, want)
	}
}

func TestPeerAddedKeepsOtherHashes(t *testing.T) {
	before := testSpec(2)
	dep, nodes := applied(before, state.Running)
	after := testSpec(3)
	for i := range before.Nodes {
		if after.Nodes[i].SpecHash != before.Nodes[i].SpecHash {
			t.Fatalf("node %s hash moved when a peer was added", before.Nodes[i].Name)
		}
	}
	if after.SpecHash == before.SpecHash {
		t.Fatal("deployment hash did not move when a peer was added")
	}
	p := mustCompute(t, Input{Desired: after, Applied: dep, Nodes: nodes, Resolver: catalog})
	if got, want := outcomes(p), "node-10=unchanged node-11=unchanged node-12=create"; got != want {
		t.Fatalf("outcomes = %s, want %s", got, want)
	}
	if p.Action != ActionConverge || p.Destructive {
		t.Fatalf("action = %s destructive=%t, want converge/false", p.Action, p.Destructive)
	}
	// Only the node being created counts toward... every selected desired node.
	if p.Totals.CPUs != 6 {
		t.Fatalf("totals cpus = %d, want 6", p.Totals.CPUs)
	}
}

func TestSameSpecResealedIsNoDrift(t *testing.T) {
	// An opaque Pigsty variable (pg_version, node_packages …) never reaches
	// the resolved spec: the inventory resolves to the same spec, with only
	// unhashed fields (source) differing.
	s := testSpec(2)
	dep, nodes := applied(s, state.Running)
	again := testSpec(2)
	again.Source = spec.Sources{"elsewhere/pigsty.yml", "elsewhere/group_vars/all.yml"}
	again.Seal()
	p := mustCompute(t, Input{Desired: again, Applied: dep, Nodes: nodes, Resolver: catalog})
	if p.Action != ActionNone || outcomes(p) != "node-10=unchanged node-11=unchanged" {
		t.Fatalf("action %s, outcomes %s; want none", p.Action, outcomes(p))
	}
}

// A definition change outside vCPUs, memory and root-disk growth
// recreates that node alone.
func TestDefinitionChangedRecreatesOnlyThatNode(t *testing.T) {
	s := testSpec(3)
	dep, nodes := applied(s, state.Running)
	want := testSpec(3)
	want.Nodes[1].Aliases = []string{"pg"}
	want.Seal()
	p := mustCompute(t, Input{Desired: want, Applied: dep, Nodes: nodes, Resolver: catalog})
	if got, w := outcomes(p), "node-10=unchanged node-11=recreate(definition_changed) node-12=unchanged"; got != w {
		t.Fatalf("outcomes = %s, want %s", got, w)
	}
	n := p.Nodes[1]
	if !reflect.DeepEqual(n.Summary, []string{"node-11 aliases: [] -> [pg]"}) {
		t.Fatalf("summary = %q", n.Summary)
	}
	if p.Action != ActionRecreate || !p.Destructive {
		t.Fatalf("action = %s destructive=%t", p.Action, p.Destructive)
	}
	if !reflect.DeepEqual(p.Next, []string{"barn-inventory resolve | barn-plan | barn-node recreate node-11 --force"}) {
		t.Fatalf("next = %q", p.Next)
	}
	// The recreated node gets the newly resolved image; the kept ones their stored one.
	if n.Image == nil || *n.Image != d12 {
		t.Fatalf("recreate image = %+v", n.Image)
	}
}

// The sixth outcome: vCPUs, memory and a larger root disk are resized in
// place. The node keeps its committed image (nothing is downloaded), the
// plan is not destructive, and the next command is barn-node resize.
func TestResourcesChangedResizeInPlace(t *testing.T) {
	s := testSpec(3)
	dep, nodes := applied(s, state.Running)
	want := testSpec(3)
	want.Nodes[1].MemoryBytes = 8 * gib
	want.Nodes[1].CPUs = 4
	want.Nodes[1].RootDiskBytes = 128 * gib
	want.Seal()
	p := mustCompute(t, Input{Desired: want, Applied: dep, Nodes: nodes, Resolver: catalog,
		Cached: func(imageref.Identity) bool { return false }})
	if got, w := outcomes(p), "node-10=unchanged node-11=resize(resources_changed) node-12=unchanged"; got != w {
		t.Fatalf("outcomes = %s, want %s", got, w)
	}
	n := p.Nodes[1]
	if !reflect.DeepEqual(n.Changes, []Change{{Field: "cpus", From: 2, To: 4}, {Field: "memory_bytes", From: 4 * gib, To: 8 * gib},
		{Field: "root_disk_bytes", From: 64 * gib, To: 128 * gib}}) {
		t.Fatalf("changes = %+v", n.Changes)
	}
	if !reflect.DeepEqual(n.Summary, []string{"node-11 CPUs: 2 -> 4", "node-11 memory: 4 GiB -> 8 GiB", "node-11 root disk: 64 GiB -> 128 GiB"}) {
		t.Fatalf("summary = %q", n.Summary)
	}
	if p.Action != ActionResize || p.Destructive {
		t.Fatalf("action = %s destructive=%t", p.Action, p.Destructive)
	}
	if !reflect.DeepEqual(p.Next, []string{"barn-inventory resolve | barn-plan | barn-node resize node-11 --force"}) {
		t.Fatalf("next = %q", p.Next)
	}
	if n.Image == nil || *n.Image != nodes["node-11"].Image || n.Download != nil || p.Totals.DownloadImages != 0 {
		t.Fatalf("a resized node keeps its committed image: image %+v download %+v", n.Image, n.Download)
	}
}

// Only a new root disk can be smaller: a shrink is recreate, as is a
// resource change mixed with any other change, or one on a node that must
// move to another accelerator (a resize keeps the runtime's disk).
func TestResizeBoundaries(t *testing.T) {
	cases := map[string]struct {
		edit    func(n *spec.Node)
		runtime *RuntimeProfile
		want    string
	}{
		"memory decrease":       {edit: func(n *spec.Node) { n.MemoryBytes = 2 * gib }, want: "resize(resources_changed)"},
		"cpu decrease":          {edit: func(n *spec.Node) { n.CPUs = 1 }, want: "resize(resources_changed)"},
		"root disk shrink":      {edit: func(n *spec.Node) { n.RootDiskBytes = 32 * gib }, want: "recreate(definition_changed)"},
		"memory and alias":      {edit: func(n *spec.Node) { n.MemoryBytes = 8 * gib; n.Aliases = []string{"pg"} }, want: "recreate(definition_changed)"},
		"memory and data disk":  {edit: func(n *spec.Node) { n.MemoryBytes = 8 * gib; n.Disks[0].SizeBytes = 256 * gib }, want: "recreate(definition_changed)"},
		"memory, accel drifted": {edit: func(n *spec.Node) { n.MemoryBytes = 8 * gib }, runtime: &RuntimeProfile{Accel: "kvm", Arch: "amd64"}, want: "recreate(definition_changed)"},
		"memory, same runtime":  {edit: func(n *spec.Node) { n.MemoryBytes = 8 * gib }, runtime: &RuntimeProfile{Accel: "tcg", Arch: "amd64"}, want: "resize(resources_changed)"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s := testSpec(1)
			dep, nodes := applied(s, state.Running)
			want := testSpec(1)
			c.edit(&want.Nodes[0])
			want.Seal()
			p := mustCompute(t, Input{Desired: want, Applied: dep, Nodes: nodes, Resolver: catalog, Runtime: c.runtime})
			if got := outcomes(p); got != "node-10="+c.want {
				t.Fatalf("outcomes = %s, want node-10=%s", got, c.want)
			}
		})
	}
}

func TestFieldChangesAndLines(t *testing.T) {
	s := testSpec(1)
	dep, nodes := applied(s, state.Running)
	want := testSpec(1)
	n := &want.Nodes[0]
	n.CPUs = 4
	n.RootDiskBytes = 1536 * gib
	n.Image = "u24:stable"
	n.Aliases = []string{"pg"}
	n.Disks = append(n.Disks, spec.Disk{Name: "logs", Mount: "/logs", SizeBytes: 10 * gib, FS: "xfs", Persistent: true, Serial: "logsserialaaaaaaaaaa"})
	n.Disks[0].SizeBytes = 256 * gib
	n.Shares = []spec.Share{{Host: "/srv/a", Guest: "/mnt/a", Readonly: true, Tag: "barn-00000000000000000001"}}
	want.Seal()
	p := mustCompute(t, Input{Desired: want, Applied: dep, Nodes: nodes, Resolver: fakeResolver{"u24:stable/amd64": d12}})
	got := p.Nodes[0].Summary
	wantLines := []string{
		"node-10 image: d12:stable -> u24:stable",
		"node-10 CPUs: 2 -> 4",
		"node-10 root disk: 64 GiB -> 1.5 TiB",
		"node-10 data disk /data size: 128 GiB -> 256 GiB",
		"node-10 data disk /logs added: /logs 10 GiB (xfs fs, persistent)",
		"node-10 aliases: [] -> [pg]",
		"node-10 share /srv/a:/mnt/a (ro) added",
	}
	if !reflect.DeepEqual(got, wantLines) {
		t.Fatalf("summary =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantLines, "\n"))
	}
	var fields []string
	for _, c := range p.Nodes[0].Changes {
		fields = append(fields, c.Field)
	}
	if strings.Join(fields, ",") != "image,cpus,root_disk_bytes,disks,aliases,shares" {
		t.Fatalf("fields = %v", fields)
	}
}

func TestAutoFilesystemIsNotDrift(t *testing.T) {
	s := testSpec(1)
	s.Nodes[0].Disks[0].FS = "xfs" // committed with a concrete fs
	s.Seal()
	dep, nodes := applied(s, state.Running)
	want := testSpec(1) // desired says fs: auto
	p := mustCompute(t, Input{Desired: want, Applied: dep, Nodes: nodes, Resolver: catalog})
	if outcomes(p) != "node-10=unchanged" {
		t.Fatalf("outcomes = %s, want unchanged (auto matches xfs)", outcomes(p))
	}
	// A concrete change is drift.
	want.Nodes[0].Disks[0].FS = "ext4"
	want.Seal()
	p = mustCompute(t, Input{Desired: want, Applied: dep, Nodes: nodes, Resolver: catalog})
	if outcomes(p) != "node-10=recreate(definition_changed)" ||
		!reflect.DeepEqual(p.Nodes[0].Summary, []string{"node-10 data disk /data fs: xfs -> ext4"}) {
		t.Fatalf("outcomes = %s summary %q", outcomes(p), p.Nodes[0].Summary)
	}
}

func TestHostRemovedIsMissing(t *testing.T) {
	s := testSpec(3)
	dep, nodes := applied(s, state.Running)
	want := testSpec(2)
	p := mustCompute(t, Input{Desired: want, Applied: dep, Nodes: nodes, Resolver: catalog})
	if got, w := outcomes(p), "node-10=unchanged node-11=unchanged node-12=missing(absent_from_spec)"; got != w {
		t.Fatalf("outcomes = %s, want %s", got, w)
	}
	if p.Action != ActionBlocked || p.Destructive {
		t.Fatalf("action = %s destructive=%t, want blocked/false", p.Action, p.Destructive)
	}
	if !reflect.DeepEqual(p.Next, []string{"barn-node destroy node-12 --force"}) {
		t.Fatalf("next = %q", p.Next)
	}
	if p.Nodes[2].Address != "10.10.10.12" || p.Nodes[2].Image == nil {
		t.Fatalf("missing node keeps its committed address and image: %+v", p.Nodes[2])
	}
	// Missing nodes are not counted in totals nor listed in images.
	if p.Totals.CPUs != 4 {
		t.Fatalf("totals cpus = %d, want 4", p.Totals.CPUs)
	}
}

func TestSkippedNodeIsMissing(t *testing.T) {
	s := testSpec(2)
	dep, nodes := applied(s, state.Stopped)
	want := testSpec(1)
	want.Skipped = []spec.Skipped{{Name: "node-11", Address: "10.10.10.11"}}
	want.Seal()
	p := mustCompute(t, Input{Desired: want, Applied: dep, Nodes: nodes, Resolver: catalog})
	if got, w := outcomes(p), "node-10=start node-11=missing(vm_skip)"; got != w {
		t.Fatalf("outcomes = %s, want %s", got, w)
	}
	if p.Action != ActionBlocked {
		t.Fatalf("action = %s, want blocked", p.Action)
	}
}

func TestSubnetChangeRecreatesEveryNode(t *testing.T) {
	s := testSpec(2)
	dep, nodes := applied(s, state.Running)
	want := testSpec(2)
	want.Deployment.Subnet = spec.Subnet{CIDR: "10.10.20.0/24", Host: "10.10.20.1",
		Reserved: "10.10.20.2-10.10.20.8", Pool: "10.10.20.9-10.10.20.254"}
	for i := range want.Nodes {
		want.Nodes[i].Address = strings.Replace(want.Nodes[i].Address, "10.10.10.", "10.10.20.", 1)
	}
	want.Seal()
	p := mustCompute(t, Input{Desired: want, Applied: dep, Nodes: nodes, Resolver: catalog})
	if got, w := outcomes(p), "node-10=recreate(deployment_recreate_required) node-11=recreate(deployment_recreate_required)"; got != w {
		t.Fatalf("outcomes = %s, want %s", got, w)
	}
	if p.Action != ActionRecreate || !p.Destructive {
		t.Fatalf("action = %s destructive=%t", p.Action, p.Destructive)
	}
	n := p.Nodes[0]
	if n.Changes[0].Field != "deployment.subnet" || n.Summary[0] != "node-10 private network: 10.10.10.0/24 -> 10.10.20.0/24" {
		t.Fatalf("changes = %+v summary %q", n.Changes, n.Summary)
	}
	if n.Summary[1] != "node-10 address: 10.10.10.10 -> 10.10.20.10" {
		t.Fatalf("summary = %q", n.Summary)
	}
	if !hasWarning(p, "non_default_subnet") {
		t.Fatalf("warnings = %+v, want non_default_subnet", p.Warnings)
	}
	if !reflect.DeepEqual(p.Next, []string{"barn-inventory resolve | barn-plan | barn-node recreate node-10 node-11 --force"}) {
		t.Fatalf("next = %q", p.Next)
	}
}

func TestEnvelopeChangeDetectedWithoutDeploymentState(t *testing.T) {
	// Committed nodes but no state.json: the node hash still proves the
	// envelope they were built under.
	s := testSpec(2)
	_, nodes := applied(s, state.Running)
	want := testSpec(2)
	want.Deployment.User = spec.User{Name: "admin"}
	want.Seal()
	p := mustCompute(t, Input{Desired: want, Nodes: nodes, Resolver: catalog})
	if got, w := outcomes(p), "node-10=recreate(deployment_recreate_required) node-11=recreate(deployment_recreate_required)"; got != w {
		t.Fatalf("outcomes = %s, want %s", got, w)
	}
	// And the same envelope means unchanged, not create.
	p = mustCompute(t, Input{Desired: s, Nodes: nodes, Resolver: catalog})
	if outcomes(p) != "node-10=unchanged node-11=unchanged" || p.Action != ActionNone {
		t.Fatalf("outcomes = %s action %s", outcomes(p), p.Action)
	}
}

func TestRuntimeDrift(t *testing.T) {
	s := testSpec(2)
	dep, nodes := applied(s, state.Running)
	nodes["node-11"].Accel = "kvm"
	p := mustCompute(t, Input{Desired: s, Applied: dep, Nodes: nodes, Resolver: catalog,
		Runtime: &RuntimeProfile{Accel: "tcg", Arch: "amd64"}})
	if got, w := outcomes(p), "node-10=unchanged node-11=recreate(runtime_drift)"; got != w {
		t.Fatalf("outcomes = %s, want %s", got, w)
	}
	if !reflect.DeepEqual(p.Nodes[1].Changes, []Change{{Field: "runtime.accel", From: "kvm", To: "tcg"}}) {
		t.Fatalf("changes = %+v", p.Nodes[1].Changes)
	}
	if p.Action != ActionRecreate || !p.Destructive {
		t.Fatalf("action = %s", p.Action)
	}
	// Unknown runtime: no runtime drift is claimed.
	p = mustCompute(t, Input{Desired: s, Applied: dep, Nodes: nodes, Resolver: catalog})
	if p.Action != ActionNone {
		t.Fatalf("action = %s with unknown runtime, want none", p.Action)
	}
	// A native deployment moved to another host architecture.
	s2 := testSpec(1)
	s2.Deployment.Arch = "native"
	s2.Seal()
	dep2, nodes2 := applied(s2, state.Running)
	p = mustCompute(t, Input{Desired: s2, Applied: dep2, Nodes: nodes2, Resolver: fakeResolver{"d12:stable/arm64": d12},
		Runtime: &RuntimeProfile{Accel: "tcg", Arch: "arm64"}})
	if outcomes(p) != "node-10=recreate(runtime_drift)" || p.Nodes[0].Changes[0].Field != "runtime.arch" {
		t.Fatalf("outcomes = %s changes %+v", outcomes(p), p.Nodes[0].Changes)
	}
}

// TestForeignGuestNoAccelDrift: an arm64 deployment on an amd64 host with
// KVM runs TCG by policy: its recorded tcg is not drift.
func TestForeignGuestNoAccelDrift(t *testing.T) {
	s := testSpec(1)
	s.Deployment.Arch = "arm64"
	s.Seal()
	dep, nodes := applied(s, state.Running)
	arm := d12
	arm.Arch, arm.File, arm.Boot = "arm64", "images/d12-12.13-arm64.qcow2", "uefi"
	nodes["node-10"].Accel = "tcg"
	nodes["node-10"].Image = arm
	p := mustCompute(t, Input{Desired: s, Applied: dep, Nodes: nodes, Resolver: fakeResolver{"d12:stable/arm64": arm},
		Runtime: &RuntimeProfile{Accel: "kvm", Arch: "amd64"}})
	if outcomes(p) != "node-10=unchanged" {
		t.Fatalf("outcomes = %s changes %+v", outcomes(p), p.Nodes[0].Changes)
	}
}

// TestAmd64GuestOnArm64Host: the reverse, an amd64 deployment planned on
// an arm64 host with KVM (Barn runs it under single-threaded TCG by
// policy): a new node resolves the amd64 variant, and a running one
// recorded under tcg is not drift. Proven here by plan and argv goldens
// only (lib/qemu amd64-on-arm64.txtar): this host is amd64.
func TestAmd64GuestOnArm64Host(t *testing.T) {
	s := testSpec(1)
	s.Deployment.Arch = "amd64"
	s.Seal()
	host := &RuntimeProfile{Accel: "kvm", Arch: "arm64"}
	p := mustCompute(t, Input{Desired: s, Resolver: fakeResolver{"d12:stable/amd64": d12}, Runtime: host})
	if outcomes(p) != "node-10=create" || p.Nodes[0].Image == nil || p.Nodes[0].Image.Arch != "amd64" {
		t.Fatalf("outcomes = %s image %+v", outcomes(p), p.Nodes[0].Image)
	}
	dep, nodes := applied(s, state.Running)
	nodes["node-10"].Accel = "tcg"
	p = mustCompute(t, Input{Desired: s, Applied: dep, Nodes: nodes, Resolver: fakeResolver{"d12:stable/amd64": d12}, Runtime: host})
	if outcomes(p) != "node-10=unchanged" {
		t.Fatalf("outcomes = %s changes %+v", outcomes(p), p.Nodes[0].Changes)
	}
}

func TestSelectors(t *testing.T) {
	s := testSpec(3)
	dep, nodes := applied(s, state.Stopped)
	want := testSpec(3)
	want.Nodes[2].Aliases = []string{"pg"}
	want.Seal()
	p := mustCompute(t, Input{Desired: want, Applied: dep, Nodes: nodes, Resolver: catalog, Selected: []string{"node-11"}})
	if outcomes(p) != "node-11=start" || p.Action != ActionStart {
		t.Fatalf("outcomes = %s action %s", outcomes(p), p.Action)
	}
	if !reflect.DeepEqual(p.Selected, []string{"node-11"}) || p.Totals.CPUs != 2 {
		t.Fatalf("selected %q totals %+v", p.Selected, p.Totals)
	}
	if len(p.Spec.Nodes) != 3 {
		t.Fatal("the plan must carry the full desired spec")
	}
	if len(p.Blocked) != 0 {
		t.Fatalf("blocked = %q; unselected drift does not block a plain start", p.Blocked)
	}

	// A selected recreate beside an unselected drifting peer is not
	// blocked: the peer keeps its applied definition, and the next command
	// recreates the selection alone.
	want.Nodes[1].Aliases = []string{"db"}
	want.Seal()
	p = mustCompute(t, Input{Desired: want, Applied: dep, Nodes: nodes, Resolver: catalog, Selected: []string{"node-11"}})
	if len(p.Blocked) != 0 || len(p.Next) != 1 || !strings.Contains(p.Next[0], "barn-node recreate node-11 --force") {
		t.Fatalf("blocked = %q next = %q", p.Blocked, p.Next)
	}

	// Missing nodes can be selected by name.
	p = mustCompute(t, Input{Desired: testSpec(2), Applied: dep, Nodes: nodes, Resolver: catalog, Selected: []string{"node-12"}})
	if outcomes(p) != "node-12=missing(absent_from_spec)" {
		t.Fatalf("outcomes = %s", outcomes(p))
	}
}

func TestUnknownSelector(t *testing.T) {
	s := testSpec(3)
	_, err := Compute(Input{Desired: s, Selected: []string{"node-1O", "node-11"}})
	e := wantClass(t, err, exitcode.Usage, "unknown_node")
	if !strings.Contains(e.Message, `unknown node "node-1O"; known nodes: node-10, node-11, node-12 (did you mean "node-10"?)`) {
		t.Fatalf("message = %q", e.Message)
	}
	if e.Next != "barn-plan node-10 node-11" {
		t.Fatalf("next = %q", e.Next)
	}
	d, ok := e.Detail.(UnknownNode)
	if !ok || !reflect.DeepEqual(d.Known, []string{"node-10", "node-11", "node-12"}) {
		t.Fatalf("detail = %#v", e.Detail)
	}
	_, err = Compute(Input{Desired: s, Selected: []string{"zzz"}})
	e = wantClass(t, err, exitcode.Usage, "unknown_node")
	if strings.Contains(e.Message, "did you mean") || e.Next != "barn-plan" {
		t.Fatalf("no near miss expected: %q next %q", e.Message, e.Next)
	}
}

func TestNearMiss(t *testing.T) {
	cands := []string{"meta", "pg-test-1", "pg-test-2"}
	for name, want := range map[string]string{
		"mta": "meta", "meat": "", "pg-tset-1": "pg-test-1", "pg-test-3": "pg-test-1", "pg": "", "mx": "",
	} {
		if got := NearMiss(name, cands); got != want {
			t.Errorf("NearMiss(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestImagesUnresolved(t *testing.T) {
	s := testSpec(2)
	for _, r := range []imageref.Resolver{nil, noCatalog{}} {
		p := mustCompute(t, Input{Desired: s, Resolver: r})
		if len(p.Images) != 0 || p.Nodes[0].Image != nil || p.Nodes[0].Selector != "d12:stable" {
			t.Fatalf("resolver %T: images %+v node %+v", r, p.Images, p.Nodes[0])
		}
		if !hasWarning(p, "images_unresolved") || len(p.Warnings) != 1 {
			t.Fatalf("resolver %T: warnings = %+v", r, p.Warnings)
		}
	}
	// An unknown selector is the resolver's usage error, with the node named.
	_, err := Compute(Input{Desired: s, Resolver: fakeResolver{}})
	e := wantClass(t, err, exitcode.Usage, "unknown_image")
	if !strings.Contains(e.Message, `node node-10: resolving image "d12:stable" for amd64`) {
		t.Fatalf("message = %q", e.Message)
	}
}

func TestKeptNodesKeepStoredImage(t *testing.T) {
	s := testSpec(2)
	dep, nodes := applied(s, state.Running)
	old := d12
	old.Version, old.SHA256 = "12.12", "0ld"
	nodes["node-10"].Image = old
	want := testSpec(3)
	p := mustCompute(t, Input{Desired: want, Applied: dep, Nodes: nodes, Resolver: catalog})
	if *p.Nodes[0].Image != old || *p.Nodes[2].Image != d12 {
		t.Fatalf("images: kept %+v new %+v", p.Nodes[0].Image, p.Nodes[2].Image)
	}
	if len(p.Images) != 2 || p.Images[0].Version != "12.12" || p.Images[1].Version != "12.13" {
		t.Fatalf("images = %+v", p.Images)
	}
}

func TestWarnings(t *testing.T) {
	s := testSpec(2)
	s.Warnings = []spec.Warning{
		{Code: "interface_name", Key: "pg_vip_interface", Value: "eth1"},
		{Code: "interface_name", Key: "vip_interface", Value: "eth2", Nodes: []string{"node-99"}},
		{Code: "admin_ip_not_managed", Value: "10.10.10.2"},
	}
	s.Seal()
	tst := d12
	tst.Status = "testing"
	p := mustCompute(t, Input{Desired: s, Resolver: fakeResolver{"d12:stable/amd64": tst}})
	var codes []string
	for _, w := range p.Warnings {
		codes = append(codes, w.Code+":"+w.Node)
	}
	if got := strings.Join(codes, " "); got != "image_testing: interface_names:" {
		t.Fatalf("warnings = %s (%+v)", got, p.Warnings)
	}
	if !strings.Contains(p.Warnings[1].Message, "pg_vip_interface = eth1 (every node)") {
		t.Fatalf("interface warning = %q", p.Warnings[1].Message)
	}
}

// A root disk below the image's virtual size blocks the plan (case 4 of
// issue 12: it used to be a warning that promised a refusal apply never
// made): the finding names the node, the inventory field, the image and
// its virtual size, and no next command is offered. A disk of exactly the
// image's size, and a kept node, are fine.
func TestRootDiskBelowImageBlocks(t *testing.T) {
	s := testSpec(2)
	s.Nodes[1].RootDiskBytes = 2 * gib // d12 is 3 GiB
	s.Seal()
	p := mustCompute(t, Input{Desired: s, Resolver: catalog})
	want := "node-11: vm_disk: root disk 2GiB is smaller than the image's virtual size 3GiB of image d12@12.13/amd64; raise vm_disk to at least 3GiB"
	if p.Action != ActionBlocked || len(p.Next) != 0 || strings.Join(p.Blocked, "|") != want {
		t.Fatalf("action %s, next %q, blocked %q; want blocked, no next, %q", p.Action, p.Next, p.Blocked, want)
	}
	for _, w := range p.Warnings {
		if strings.Contains(w.Message, "vm_disk") {
			t.Fatalf("the root disk is a warning too: %q", w.Message)
		}
	}

	s.Nodes[1].RootDiskBytes = d12.VirtualSize
	s.Seal()
	if p := mustCompute(t, Input{Desired: s, Resolver: catalog}); p.Action != ActionCreate || len(p.Blocked) != 0 {
		t.Fatalf("a root disk of exactly the image's size: action %s, blocked %q", p.Action, p.Blocked)
	}

	// a recreate to a smaller root disk is blocked too
	dep, nodes := applied(testSpec(2), state.Running)
	if p := mustCompute(t, Input{Desired: func() *spec.Spec { w := testSpec(2); w.Nodes[1].RootDiskBytes = gib; w.Seal(); return w }(),
		Applied: dep, Nodes: nodes, Resolver: catalog}); p.Action != ActionBlocked || !strings.Contains(strings.Join(p.Blocked, "|"), "node-11: vm_disk: root disk 1GiB") {
		t.Fatalf("recreate to 1 GiB: action %s, blocked %q", p.Action, p.Blocked)
	}
}

func TestSharesWarnOnDarwin(t *testing.T) {
	s := testSpec(2)
	s.Nodes[1].Shares = []spec.Share{{Host: "/srv/a", Guest: "/srv/a", Readonly: true, Tag: "barn-00000000000000000001"}}
	s.Seal()
	p := mustCompute(t, Input{Desired: s, Resolver: catalog, GOOS: "darwin"})
	var got []Warning
	for _, w := range p.Warnings {
		if w.Code == "shares_unsupported_on_darwin" {
			got = append(got, w)
		}
	}
	if len(got) != 1 || got[0].Node != "node-11" || !strings.Contains(got[0].Message, "9p shares cannot start on macOS hosts") {
		t.Fatalf("darwin warnings = %+v", p.Warnings)
	}
	// The same spec on Linux: no such warning.
	if p := mustCompute(t, Input{Desired: s, Resolver: catalog, GOOS: "linux"}); hasWarning(p, "shares_unsupported_on_darwin") {
		t.Fatalf("linux warnings = %+v", p.Warnings)
	}
	// Darwin without shares: none either.
	if p := mustCompute(t, Input{Desired: testSpec(2), Resolver: catalog, GOOS: "darwin"}); hasWarning(p, "shares_unsupported_on_darwin") {
		t.Fatalf("darwin without shares: %+v", p.Warnings)
	}
}

func TestPersistentShrinkWarning(t *testing.T) {
	s := testSpec(1)
	s.Nodes[0].Disks[0].Persistent = true
	s.Seal()
	dep, nodes := applied(s, state.Running)
	want := testSpec(1)
	want.Nodes[0].Disks[0].Persistent = true
	want.Nodes[0].Disks[0].SizeBytes = 64 * gib
	want.Seal()
	p := mustCompute(t, Input{Desired: want, Applied: dep, Nodes: nodes, Resolver: catalog})
	if !hasWarning(p, "persistent_disk_shrink") || outcomes(p) != "node-10=recreate(definition_changed)" {
		t.Fatalf("outcomes %s warnings %+v", outcomes(p), p.Warnings)
	}
}

func TestIntegrityErrors(t *testing.T) {
	s := testSpec(2)
	dep, nodes := applied(s, state.Running)
	dep.SpecHash = strings.Repeat("0", 64)
	_, err := Compute(Input{Desired: s, Applied: dep, Nodes: nodes})
	wantClass(t, err, exitcode.Integrity, "state_hash_mismatch")

	dep, nodes = applied(s, state.Running)
	nodes["node-11"].Node = "node-12"
	_, err = Compute(Input{Desired: s, Applied: dep, Nodes: nodes})
	wantClass(t, err, exitcode.Integrity, "node_state_mismatch")

	dep, nodes = applied(s, state.Running)
	nodes["node-11"].SpecHash = ""
	_, err = Compute(Input{Desired: s, Applied: dep, Nodes: nodes})
	wantClass(t, err, exitcode.Integrity, "node_state_mismatch")
}

func TestDesiredValidation(t *testing.T) {
	cases := map[string]func(s *spec.Spec){
		"invalid_spec/schema":      func(s *spec.Spec) { s.Schema = "barn.spec/v2" },
		"invalid_spec/no nodes":    func(s *spec.Spec) { s.Nodes = nil; s.Seal() },
		"invalid_spec/dup name":    func(s *spec.Spec) { s.Nodes[1].Name = s.Nodes[0].Name; s.Seal() },
		"invalid_spec/dup address": func(s *spec.Spec) { s.Nodes[1].Address = s.Nodes[0].Address; s.Seal() },
		"invalid_spec/two control": func(s *spec.Spec) { s.Nodes[1].Control = true; s.Seal() },
		"invalid_spec/ipv6":        func(s *spec.Spec) { s.Nodes[1].Address = "fe80::1"; s.Seal() },
		// A hand-edited spec resealed with a name that is not a node name
		// (barn-node turns it into a directory under the state root).
		"invalid_spec/path name":  func(s *spec.Spec) { s.Nodes[1].Name = "../../etc"; s.Seal() },
		"invalid_spec/upper name": func(s *spec.Spec) { s.Nodes[1].Name = "Node 11"; s.Seal() },
		"invalid_spec/no cpus":    func(s *spec.Spec) { s.Nodes[1].CPUs = 0; s.Seal() },
		"invalid_spec/tiny mem":   func(s *spec.Spec) { s.Nodes[1].MemoryBytes = 5; s.Seal() },
		"invalid_spec/no root":    func(s *spec.Spec) { s.Nodes[1].RootDiskBytes = -1; s.Seal() },
		"spec_hash_mismatch/node": func(s *spec.Spec) { s.Nodes[1].CPUs = 3 },
		"spec_hash_mismatch/deployment": func(s *spec.Spec) {
			s.SpecHash = strings.Repeat("f", 64)
		},
		"invalid_spec/too many": func(s *spec.Spec) { *s = *testSpec(MaxNodes + 1) },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			s := testSpec(2)
			mutate(s)
			_, err := Compute(Input{Desired: s})
			wantClass(t, err, exitcode.Usage, strings.Split(name, "/")[0])
		})
	}
	_, err := Compute(Input{})
	wantClass(t, err, exitcode.Usage, "invalid_spec")
}

func TestAbsentPhaseIsNotCommitted(t *testing.T) {
	s := testSpec(2)
	dep, nodes := applied(s, state.Running)
	nodes["node-11"].Phase = state.Absent
	p := mustCompute(t, Input{Desired: s, Applied: dep, Nodes: nodes, Resolver: catalog})
	if outcomes(p) != "node-10=unchanged node-11=create" || p.Action != ActionConverge {
		t.Fatalf("outcomes = %s action %s", outcomes(p), p.Action)
	}
	// An absent node that left the spec is not missing either.
	p = mustCompute(t, Input{Desired: testSpec(1), Applied: dep, Nodes: nodes, Resolver: catalog})
	if outcomes(p) != "node-10=unchanged" {
		t.Fatalf("outcomes = %s", outcomes(p))
	}
}

func TestDeterministicJSON(t *testing.T) {
	s := testSpec(2)
	dep, nodes := applied(s, state.Running)
	want := testSpec(1)
	want.Nodes[0].MemoryBytes = 8 * gib
	want.Seal()
	in := Input{Desired: want, Applied: dep, Nodes: nodes, Resolver: noCatalog{}}
	a, err := wire.Marshal(mustCompute(t, in))
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		b, _ := wire.Marshal(mustCompute(t, in))
		if !bytes.Equal(a, b) {
			t.Fatalf("plan output is not deterministic:\n%s\n%s", a, b)
		}
	}
	if bytes.Contains(a, []byte("null")) {
		t.Fatalf("plan JSON contains null: %s", a)
	}
	// It round-trips strictly into the document type.
	var back Plan
	if err := wire.DecodeStrict(a, &back); err != nil {
		t.Fatalf("strict decode: %v", err)
	}
	if back.Action != ActionBlocked || len(back.Nodes) != 2 {
		t.Fatalf("round trip: %+v", back)
	}
}

func TestResolverErrorKeepsClass(t *testing.T) {
	s := testSpec(1)
	_, err := Compute(Input{Desired: s, Resolver: failing{exitcode.New(exitcode.Integrity, "catalog signature is invalid")}})
	e := wantClass(t, err, exitcode.Integrity, "")
	if !strings.Contains(e.Message, "catalog signature is invalid") {
		t.Fatalf("message = %q", e.Message)
	}
	_, err = Compute(Input{Desired: s, Resolver: failing{errors.New("boom")}})
	wantClass(t, err, exitcode.Runtime, "")
}

type failing struct{ err error }

func (f failing) Resolve(string, string) (imageref.Identity, error) {
	return imageref.Identity{}, f.err
}

func hasWarning(p *Plan, code string) bool {
	for _, w := range p.Warnings {
		if w.Code == code {
			return true
		}
	}
	return false
}

// The plan says what apply will download: per created or recreated node
// whether its exact image is cached, and the distinct images and bytes to
// fetch (an image two nodes share is counted once); kept nodes download
// nothing.
func TestDownloads(t *testing.T) {
	s := testSpec(2)
	dep, nodes := applied(s, state.Running)
	want := testSpec(4)
	want.Nodes[1].Aliases = []string{"pg"} // recreate node-11
	d13 := d12
	d13.Selector, d13.Image, d13.Version, d13.File, d13.SHA256, d13.SizeBytes = "d13:stable", "d13", "13.1", "images/d13-13.1-amd64.qcow2", "bb22", 300<<20
	want.Nodes[3].Image = "d13:stable"
	want.Seal()
	resolver := fakeResolver{"d12:stable/amd64": d12, "d13:stable/amd64": d13}
	cached := map[string]bool{}
	in := Input{Desired: want, Applied: dep, Nodes: nodes, Resolver: resolver,
		Cached: func(id imageref.Identity) bool { return cached[id.SHA256] }}

	p := mustCompute(t, in)
	got := []string{}
	for _, np := range p.Nodes {
		got = append(got, fmt.Sprintf("%s %s %+v", np.Name, np.Outcome, np.Download))
	}
	wantLines := []string{
		"node-10 unchanged <nil>",
		"node-11 recreate &{Cached:false Bytes:419430400}",
		"node-12 create &{Cached:false Bytes:419430400}",
		"node-13 create &{Cached:false Bytes:314572800}",
	}
	if strings.Join(got, "\n") != strings.Join(wantLines, "\n") {
		t.Fatalf("downloads:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantLines, "\n"))
	}
	if p.Totals.DownloadImages != 2 || p.Totals.DownloadBytes != (400+300)<<20 {
		t.Fatalf("totals %+v", p.Totals)
	}
	var text strings.Builder
	if err := p.RenderText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "    image d13@13.1/amd64 (download 300 MiB)\n") || !strings.Contains(text.String(), "download: 2 image(s), 700 MiB\n") {
		t.Fatalf("text:\n%s", text.String())
	}

	cached[d12.SHA256] = true
	p = mustCompute(t, in)
	if d := p.Nodes[2].Download; d == nil || !d.Cached || d.Bytes != 0 || p.Totals.DownloadImages != 1 || p.Totals.DownloadBytes != 300<<20 {
		t.Fatalf("with d12 cached: node-12 %+v totals %+v", d, p.Totals)
	}

	in.Cached = nil
	p = mustCompute(t, in)
	if p.Nodes[2].Download != nil || p.Totals.DownloadImages != 0 {
		t.Fatalf("no cache consulted: %+v %+v", p.Nodes[2].Download, p.Totals)
	}
}

// The plan's next commands work as printed (issue 12): each plans the
// spec's own inventory afresh and hands it to barn-node, never a bare
// `barn-node apply` that would wait for a plan on stdin.
func TestNextCommandsPlanTheSpecsInventory(t *testing.T) {
	s := testSpec(2)
	s.Source = spec.Sources{"my lab.yml", "group_vars/all.yml"}
	s.Seal()
	p := mustCompute(t, Input{Desired: s, Resolver: catalog})
	if want := []string{"barn-inventory resolve -f 'my lab.yml' | barn-plan | barn-node apply"}; !reflect.DeepEqual(p.Next, want) {
		t.Fatalf("next = %q, want %q", p.Next, want)
	}
}
