package state

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/uuid"

	"barn.dev/lib/lazyre"
	"barn.dev/lib/spec"
	"barn.dev/lib/vmrecord"
)

var hex64RE = lazyre.New(`^[0-9a-f]{64}$`)

// phases is the closed set of node phases.
var phases = map[Phase]bool{
	Absent: true, Preparing: true, Prepared: true, Starting: true,
	Running: true, Stopping: true, Stopped: true, Destroying: true,
}

// Valid reports whether p is one of the node phases.
func (p Phase) Valid() bool { return phases[p] }

// validUUID accepts the canonical 36-character hyphenated form only.
func validUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	_, err := uuid.Parse(s)
	return err == nil
}

type problems []string

func (p *problems) addf(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

// ValidateDeployment returns every problem of a decoded deployment state,
// or none. The stored spec_hash must equal spec.DeploymentHash of the
// stored spec, and every node's spec_hash its node hash.
func ValidateDeployment(d *Deployment) []string {
	var p problems
	if d.Schema != DeploymentSchema {
		p.addf("schema is %q, want %s", d.Schema, DeploymentSchema)
	}
	if d.Generation < 1 {
		p.addf("generation is %d, want ≥1", d.Generation)
	}
	if d.Spec.Schema != spec.Schema {
		p.addf("spec.schema is %q, want %s", d.Spec.Schema, spec.Schema)
	}
	if h := spec.DeploymentHash(&d.Spec); d.SpecHash != h {
		p.addf("spec_hash %q does not match the stored spec (hash %s)", d.SpecHash, h)
	} else if d.Spec.SpecHash != "" && d.Spec.SpecHash != h {
		p.addf("spec.spec_hash %q does not match the stored spec (hash %s)", d.Spec.SpecHash, h)
	}
	seen := map[string]bool{}
	for i, n := range d.Spec.Nodes {
		if !ValidNodeName(n.Name) {
			p.addf("spec.nodes[%d].name %q is not a valid node name", i, n.Name)
		}
		if seen[n.Name] {
			p.addf("spec.nodes[%d].name %q appears twice", i, n.Name)
		}
		seen[n.Name] = true
		if h := spec.NodeHash(d.Spec.Deployment, n); n.SpecHash != "" && n.SpecHash != h {
			p.addf("spec.nodes[%d] (%s) spec_hash %q does not match its definition (hash %s)", i, n.Name, n.SpecHash, h)
		}
	}
	if d.UpdatedAt.IsZero() {
		p.addf("updated_at is missing")
	}
	return p
}

// ValidateNode returns every problem of a decoded node state read from
// nodes/<node>/state.json.
func (r *Root) ValidateNode(node string, n *Node) []string {
	var p problems
	if n.Schema != NodeSchema {
		p.addf("schema is %q, want %s", n.Schema, NodeSchema)
	}
	if n.Node != node {
		p.addf("node is %q but the file is in the directory of node %q", n.Node, node)
	}
	if n.Spec.Name != "" && n.Spec.Name != n.Node {
		p.addf("spec.name %q differs from node %q", n.Spec.Name, n.Node)
	}
	if !validUUID(n.VMUUID) {
		p.addf("vm_uuid %q is not a UUID", n.VMUUID)
	}
	if !n.Phase.Valid() {
		p.addf("phase %q is not one of absent, preparing, prepared, starting, running, stopping, stopped, destroying", n.Phase)
	}
	if n.Generation < 1 {
		p.addf("generation is %d, want ≥1", n.Generation)
	}
	if !hex64RE.MatchString(n.SpecHash) {
		p.addf("spec_hash %q is not a 64-hex node hash", n.SpecHash)
	} else if n.Spec.SpecHash != "" && n.Spec.SpecHash != n.SpecHash {
		p.addf("spec_hash %q differs from spec.spec_hash %q", n.SpecHash, n.Spec.SpecHash)
	}
	if n.SeedSpecHash != "" && !hex64RE.MatchString(n.SeedSpecHash) {
		p.addf("seed_spec_hash %q is not a 64-hex node hash", n.SeedSpecHash)
	}
	r.checkNodePath(&p, node, "root_disk", n.RootDisk, RootDiskName)
	r.checkNodePath(&p, node, "seed", n.Seed, SeedName)
	r.checkNodePath(&p, node, "nvram", n.NVRAM, NVRAMName)
	r.checkNodePath(&p, node, "serial_log", n.SerialLog, SerialLogName)
	r.validateDataDisks(&p, node, n.DataDisks)
	r.validateFiles(&p, n)
	if n.SSHPort < 0 || n.SSHPort > 65535 {
		p.addf("ssh_port %d is out of range", n.SSHPort)
	}
	switch n.Accel {
	case "", "kvm", "tcg":
	default:
		p.addf("accel %q is not kvm or tcg", n.Accel)
	}
	checkRuntime(&p, n.Runtime)
	checkProcess(&p, n)
	if n.CreatedAt.IsZero() {
		p.addf("created_at is missing")
	}
	if n.UpdatedAt.Before(n.CreatedAt) {
		p.addf("updated_at is before created_at")
	}
	return p
}

// validateDataDisks adds the problems of node's data disk records: names
// (DNS labels, each once), paths inside the node directory, sizes and
// filesystems.
func (r *Root) validateDataDisks(p *problems, node string, disks []vmrecord.DataDisk) {
	seen := map[string]bool{}
	for i, d := range disks {
		if !ValidDiskName(d.Name) {
			p.addf("data_disks[%d].name %q is not a DNS label other than root", i, d.Name)
			continue
		}
		if seen[d.Name] {
			p.addf("data_disks[%d].name %q appears twice", i, d.Name)
		}
		seen[d.Name] = true
		if inNode := r.NodeFile(node, DataDiskFileName(d.Name)); d.Path != inNode {
			p.addf("data_disks[%d].path %q is not %s", i, d.Path, inNode)
		}
		if d.SizeBytes <= 0 {
			p.addf("data_disks[%d].size_bytes is %d, want >0", i, d.SizeBytes)
		}
		switch d.RequestedFilesystem {
		case "auto", "xfs", "ext4":
		default:
			p.addf("data_disks[%d].requested_filesystem %q is not auto, xfs or ext4", i, d.RequestedFilesystem)
		}
		switch d.ActualFilesystem {
		case "", "xfs", "ext4":
		default:
			p.addf("data_disks[%d].actual_filesystem %q is not xfs or ext4", i, d.ActualFilesystem)
		}
	}
}

// checkProcess adds the problems of the recorded process identity: only
// starting, running and stopping nodes have one, and a running node must.
func checkProcess(p *problems, n *Node) {
	if n.Process != nil {
		switch n.Phase {
		case Starting, Running, Stopping:
		default:
			p.addf("process is recorded for phase %s; only starting, running and stopping nodes have one", n.Phase)
		}
		if n.Process.PID <= 0 {
			p.addf("process.pid %d is not positive", n.Process.PID)
		}
	} else if n.Phase == Running {
		p.addf("phase is running but no process identity is recorded")
	}
}

// validateFiles adds the problems of a node's file identities: each names
// a file the state records, and each is a valid identity.
func (r *Root) validateFiles(p *problems, n *Node) {
	recorded := map[string]bool{QEMULogName: true} // at its fixed name, recorded at the first start
	for _, f := range []string{n.RootDisk, n.Seed, n.NVRAM, n.SerialLog} {
		if f != "" {
			recorded[filepath.Base(f)] = true
		}
	}
	for _, d := range n.DataDisks {
		recorded[DataDiskFileName(d.Name)] = true
	}
	for _, name := range slices.Sorted(maps.Keys(n.Files)) {
		if !recorded[name] {
			p.addf("files[%q] names no file this node state records", name)
		} else if why := n.Files[name].Valid(); why != "" {
			p.addf("files[%q]: %s", name, why)
		}
	}
}

func (r *Root) checkNodePath(p *problems, node, field, got, name string) {
	if got != "" && got != r.NodeFile(node, name) {
		p.addf("%s %q is not %s", field, got, r.NodeFile(node, name))
	}
}

func checkRuntime(p *problems, rt vmrecord.Runtime) {
	if rt == (vmrecord.Runtime{}) {
		return
	}
	if !filepath.IsAbs(rt.Directory) || filepath.Clean(rt.Directory) != rt.Directory {
		p.addf("runtime.directory %q is not a clean absolute path", rt.Directory)
	}
	if rt.QMP != filepath.Join(rt.Directory, QMPSocketName) {
		p.addf("runtime.qmp %q is not %s inside runtime.directory", rt.QMP, QMPSocketName)
	}
	// A runtime without barn_qmp is an earlier development build's
	// (earlierNode refuses it as such on read, exit 7).
	if rt.BarnQMP != "" && rt.BarnQMP != filepath.Join(rt.Directory, BarnQMPSocketName) {
		p.addf("runtime.barn_qmp %q is not %s inside runtime.directory", rt.BarnQMP, BarnQMPSocketName)
	}
	for _, s := range rt.Sockets() {
		if len(s) > MaxSocketPath {
			p.addf("runtime socket %s is %d bytes; unix sockets allow at most %d", s, len(s), MaxSocketPath)
		}
	}
	if rt.Pidfile != filepath.Join(rt.Directory, PidfileName) {
		p.addf("runtime.pidfile %q is not %s inside runtime.directory", rt.Pidfile, PidfileName)
	}
}

// artifactFile is the journal allowlist: the file each singleton kind must
// be, directly inside the node directory.
var artifactFile = map[ArtifactKind]string{RootOverlay: RootDiskName, Seed: SeedName, NVRAM: NVRAMName, SerialLogArt: SerialLogName}

// ArtifactPath returns the path an artifact of kind must have in node's
// directory; disk names the data disk for DataDiskArt. It returns "" for a
// kind outside the allowlist or an invalid disk name.
func (r *Root) ArtifactPath(node string, kind ArtifactKind, disk string) string {
	if kind == DataDiskArt {
		if !ValidDiskName(disk) {
			return ""
		}
		return r.NodeFile(node, DataDiskFileName(disk))
	}
	if f, ok := artifactFile[kind]; ok {
		return r.NodeFile(node, f)
	}
	return ""
}

// ValidateJournal returns every problem of a decoded prepare journal read
// from nodes/<node>/prepare.json: UUIDs, hashes, the artifact allowlist
// (kind/path pairs directly inside the node directory, no duplicates),
// invocation present exactly when prepared, and the state_path rule.
func (r *Root) ValidateJournal(node string, j *Journal) []string {
	var p problems
	p.operation(j.Schema, JournalSchema, j.OperationID, j.Node, node)
	if !validUUID(j.VMUUID) {
		p.addf("vm_uuid %q is not a UUID", j.VMUUID)
	}
	if !hex64RE.MatchString(j.SpecHash) {
		p.addf("spec_hash %q is not a 64-hex node hash", j.SpecHash)
	}
	seen := map[string]bool{}
	for i, a := range j.Completed {
		r.validateArtifact(&p, node, fmt.Sprintf("completed[%d]", i), a, seen)
	}
	if j.Intent != nil {
		r.validateArtifact(&p, node, "intent", *j.Intent, seen)
		if j.Prepared {
			p.addf("intent must be empty once prepared")
		}
	}
	if j.Prepared != (j.Invocation != nil) {
		p.addf("invocation must be present exactly when prepared (prepared=%t)", j.Prepared)
	}
	if j.StateCommitted && !j.Prepared {
		p.addf("state_committed is true but prepared is false")
	}
	want := r.NodeFile(node, NodeStateName)
	if j.StateCommitted && j.StatePath != want {
		p.addf("state_path %q must be %s when state_committed", j.StatePath, want)
	}
	if !j.StateCommitted && j.StatePath != "" {
		p.addf("state_path %q must be empty until state_committed", j.StatePath)
	}
	if j.StartedAt.IsZero() {
		p.addf("started_at is missing")
	}
	if j.UpdatedAt.Before(j.StartedAt) {
		p.addf("updated_at is before started_at")
	}
	return p
}

// validateArtifact adds the problems of one journal entry: the allowlist
// (kind/path pairs directly inside the node directory, no duplicates) and,
// for a reattached data disk, the retained store directory of exactly this
// node and disk.
func (r *Root) validateArtifact(p *problems, node, field string, a Artifact, seen map[string]bool) {
	if !filepath.IsAbs(a.Path) || filepath.Clean(a.Path) != a.Path {
		p.addf("%s.path %q is not a clean absolute path", field, a.Path)
		return
	}
	dir := r.NodeDir(node)
	if filepath.Dir(a.Path) != dir {
		p.addf("%s.path %q is outside the node directory %s", field, a.Path, dir)
		return
	}
	base := filepath.Base(a.Path)
	switch a.Kind {
	case DataDiskArt:
		d, ok := strings.CutSuffix(base, DataDiskSuffix)
		if !ok || !ValidDiskName(d) {
			p.addf("%s: a data-disk artifact must be <name>.qcow2 with a DNS-label name other than root, got %q", field, base)
		} else if a.Retained != "" && a.Retained != r.RetainedDiskDir(node, d) {
			p.addf("%s.retained %q must be %s", field, a.Retained, r.RetainedDiskDir(node, d))
		}
	default:
		want, ok := artifactFile[a.Kind]
		if !ok {
			p.addf("%s.kind %q is not in the allowlist (root-overlay, seed, nvram, serial-log, data-disk)", field, a.Kind)
		} else if base != want {
			p.addf("%s: a %s artifact must be %s, got %q", field, a.Kind, want, base)
		}
		if a.Retained != "" {
			p.addf("%s.retained is only for data disks", field)
		}
	}
	if a.ID != nil {
		if why := a.ID.Valid(); why != "" {
			p.addf("%s.id: %s", field, why)
		}
	}
	if seen[a.Path] {
		p.addf("%s.path %q is a duplicate", field, a.Path)
	}
	seen[a.Path] = true
}

// operation adds the problems of an operation record's header: its
// schema (want), its operation UUID and its node (the directory it is in
// is dirNode's).
func (p *problems) operation(schema, want, opID, recNode, dirNode string) {
	if schema != want {
		p.addf("schema is %q, want %s", schema, want)
	}
	if !validUUID(opID) {
		p.addf("operation_id %q is not a UUID", opID)
	}
	if recNode != dirNode {
		p.addf("node is %q but the file is in the directory of node %q", recNode, dirNode)
	}
}

// ValidateTransaction returns every problem of a decoded transaction record
// read from nodes/<node>/transaction.json.
func ValidateTransaction(node string, t *Transaction) []string {
	var p problems
	p.operation(t.Schema, TransactionSchema, t.OperationID, t.Node, node)
	if !t.From.Valid() {
		p.addf("from %q is not a node phase", t.From)
	}
	if !t.To.Valid() {
		p.addf("to %q is not a node phase", t.To)
	}
	for i, s := range t.Completed {
		if s.Name == "" {
			p.addf("completed[%d].name is empty", i)
		}
	}
	if t.StartedAt.IsZero() {
		p.addf("started_at is missing")
	}
	if t.UpdatedAt.Before(t.StartedAt) {
		p.addf("updated_at is before started_at")
	}
	return p
}

// ValidateHolder returns every problem of a lock holder record.
func ValidateHolder(h *LockHolder) []string {
	var p problems
	if h.Schema != LockHolderSchema {
		p.addf("schema is %q, want %s", h.Schema, LockHolderSchema)
	}
	if h.PID <= 0 {
		p.addf("pid %d is not positive", h.PID)
	}
	if h.Started.IsZero() {
		p.addf("started is missing")
	}
	return p
}
