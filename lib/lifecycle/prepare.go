package lifecycle

import (
	"context"
	"io"
	"os"
	"path/filepath"

	"github.com/google/uuid"

	"barn.dev/lib/disk"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/imageref"
	"barn.dev/lib/spec"
	"barn.dev/lib/state"
)

// createJob is one node to create: its definition, exact image and the
// management port allocated for it under the deployment lock.
type createJob struct {
	Deployment spec.Deployment
	Node       spec.Node
	Peers      []spec.Node
	Image      imageref.Identity
	Generation int64
	SSHPort    int
	VMUUID     string // reuse (recreate keeps the UUID? no: always fresh) – "" means new
}

// prepared is the outcome of a successful prepare: the committed node state
// (phase prepared) ready for launch, plus any warnings.
type prepared struct {
	Node     *state.Node
	Warnings []Warning
}

// prepare creates one node's artifacts under a journal and commits its
// state in phase "prepared":
//
//  1. write the journal with an empty completed list;
//  2. the root overlay over the verified base;
//  3. each data disk (a reattached retained disk is not journaled);
//  4. the seed ISO;
//  5. the UEFI vars copy for uefi images;
//  6. the invocation, prepared=true;
//  7. node state (phase prepared), then state_committed in the journal,
//     then the journal is removed.
//
// On failure the artifacts stay journaled for rollback (automatic on the
// next apply, or at once with --rollback).
func (m *Manager) prepare(ctx context.Context, job createJob) (*prepared, error) {
	name := job.Node.Name
	// Share sources first: a missing or unsafe one fails this node before
	// any artifact exists (launch re-opens them).
	if err := m.checkShares(&job.Node); err != nil {
		return nil, err
	}
	dir, err := m.Root.EnsureNodeDir(name)
	if err != nil {
		return nil, err
	}
	if err := expectEmptyNodeDir(dir); err != nil {
		return nil, err
	}
	basePath, err := m.Images.Ensure(ctx, job.Image)
	if err != nil {
		return nil, err
	}
	vmUUID := job.VMUUID
	if vmUUID == "" {
		vmUUID = uuid.NewString()
	}
	j := &state.Journal{
		Schema: state.JournalSchema, OperationID: uuid.NewString(), Node: name, VMUUID: vmUUID,
		SpecHash: job.Node.SpecHash, Completed: []state.Artifact{}, StartedAt: m.now(), UpdatedAt: m.now(),
	}
	if err := m.writeJournal(j); err != nil {
		return nil, err
	}
	m.hook("journal", name)

	var warnings []Warning
	root := m.Root.NodeFile(name, state.RootDiskName)
	// Exactly the size the spec records: a disk below the image's virtual
	// size was refused before anything was pulled (refuseSmallRootDisks),
	// and CreateOverlay refuses it again rather than grow it.
	if _, err := m.Disk.CreateOverlay(ctx, basePath, "qcow2", root, job.Node.RootDiskBytes); err != nil {
		return nil, err
	}
	if err := m.complete(j, state.RootOverlay, root); err != nil {
		return nil, err
	}
	m.hook("root-overlay", name)

	dataDisks := make([]state.DataDisk, 0, len(job.Node.Disks))
	var reattached []reattachedDisk
	undo := func() {
		for _, r := range reattached {
			if err := disk.Preserve(r.path, r.dir, r.marker); err != nil {
				m.logf("%s: could not return retained disk %s to the store: %v", name, r.path, err)
			}
		}
	}
	for _, d := range job.Node.Disks {
		p := m.Root.NodeFile(name, state.DataDiskFileName(d.Name))
		dd := state.DataDisk{Name: d.Name, Path: p, Serial: d.Serial, SizeBytes: d.SizeBytes, Mount: d.Mount,
			Persistent: d.Persistent, RequestedFilesystem: d.FS}
		reused, err := m.reattach(name, d, p)
		if err != nil {
			undo()
			return nil, err
		}
		if reused != nil {
			reattached = append(reattached, *reused)
			if fs := reused.marker.Filesystem; fs == "xfs" || fs == "ext4" {
				dd.ActualFilesystem = fs
			}
			dataDisks = append(dataDisks, dd)
			continue
		}
		if _, err := m.Disk.CreateData(ctx, p, d.SizeBytes); err != nil {
			undo()
			return nil, err
		}
		if err := m.complete(j, state.DataDiskArt, p); err != nil {
			undo()
			return nil, err
		}
		m.hook("data-disk", name)
		dataDisks = append(dataDisks, dd)
	}
	for _, r := range reattached {
		warnings = append(warnings, Warning{Stage: "data-disks", Detail: "reattached retained persistent disk " + r.marker.Name})
	}

	seed := m.Root.NodeFile(name, state.SeedName)
	if err := m.Seeds.WriteSeed(ctx, seed, SeedInput{Deployment: job.Deployment, Node: job.Node, Peers: job.Peers,
		Generation: job.Generation, VMUUID: vmUUID}); err != nil {
		undo()
		return nil, err
	}
	if err := m.complete(j, state.Seed, seed); err != nil {
		undo()
		return nil, err
	}
	m.hook("seed", name)

	nvram := ""
	if job.Image.Boot == "uefi" {
		_, vars, err := m.Emu.Firmware("uefi")
		if err != nil {
			undo()
			return nil, err
		}
		nvram = m.Root.NodeFile(name, state.NVRAMName)
		if err := copyNew(vars, nvram); err != nil {
			undo()
			return nil, err
		}
		if err := m.complete(j, state.NVRAM, nvram); err != nil {
			undo()
			return nil, err
		}
		m.hook("nvram", name)
	}

	rt, err := m.Root.EnsureNodeRuntime(name)
	if err != nil {
		undo()
		return nil, err
	}
	in := LaunchInput{Node: job.Node, VMUUID: vmUUID, Image: job.Image, RootDisk: root, DataDisks: dataDisks,
		Seed: seed, NVRAM: nvram, SSHPort: job.SSHPort, Runtime: rt, SerialLog: m.Root.NodeFile(name, state.SerialLogName)}
	inv, err := m.Emu.Invocation(in)
	if err != nil {
		undo()
		return nil, err
	}
	j.Invocation = &inv
	j.Prepared = true
	if err := m.writeJournal(j); err != nil {
		undo()
		return nil, err
	}
	m.hook("prepared", name)

	now := m.now()
	n := &state.Node{
		Schema: state.NodeSchema, Node: name, VMUUID: vmUUID, Phase: state.Prepared, Generation: job.Generation,
		SpecHash: job.Node.SpecHash, Spec: job.Node, Image: job.Image, RootDisk: root, DataDisks: dataDisks,
		Seed: seed, NVRAM: nvram, SSHPort: job.SSHPort, Accel: m.Emu.Accel(), Runtime: rt, Invocation: inv,
		CreatedAt: now, UpdatedAt: now,
	}
	if err := m.Root.WriteNode(n); err != nil {
		undo()
		return nil, err
	}
	m.hook("committed", name)
	j.StateCommitted = true
	j.StatePath = m.Root.NodeFile(name, state.NodeStateName)
	if err := m.writeJournal(j); err != nil {
		return nil, err
	}
	m.hook("journal-committed", name)
	if err := m.Root.RemoveJournal(name); err != nil {
		return nil, err
	}
	return &prepared{Node: n, Warnings: warnings}, nil
}

type reattachedDisk struct {
	path, dir string
	marker    disk.Ownership
}

// reattach moves a retained persistent disk back for d when one exists.
// A retained disk whose identity differs from d, or one kept for a disk no
// longer declared persistent, is a conflict: nothing is touched.
func (m *Manager) reattach(node string, d spec.Disk, dst string) (*reattachedDisk, error) {
	dir := m.Root.RetainedDiskDir(node, d.Name)
	own, err := disk.ReadRetained(dir)
	if err != nil || own == nil {
		return nil, err
	}
	if !d.Persistent {
		return nil, exitcode.New(exitcode.Conflict, "%s: a retained persistent disk %q exists at %s but the disk is no longer declared persistent", node, d.Name, dir).
			WithReason("retained_disk_not_persistent").WithNext("barn-node destroy --delete-persistent (whole deployment) or declare the disk persistent again")
	}
	if !own.Matches(node, d.Name, d.Serial, d.Mount, d.SizeBytes) {
		return nil, exitcode.New(exitcode.Conflict, "%s: retained disk %q at %s does not match the desired disk (size %d bytes, mount %s, serial %s)", node, d.Name, dir, own.SizeBytes, own.Mount, own.Serial).
			WithReason("retained_disk_mismatch").WithNext("restore the disk's size and mount in the inventory, or move " + dir + " away")
	}
	if err := disk.Reattach(dir, dst); err != nil {
		return nil, err
	}
	return &reattachedDisk{path: dst, dir: dir, marker: *own}, nil
}

func (m *Manager) writeJournal(j *state.Journal) error {
	j.UpdatedAt = m.now()
	return m.Root.WriteJournal(j)
}

func (m *Manager) complete(j *state.Journal, kind state.ArtifactKind, path string) error {
	j.Completed = append(j.Completed, state.Artifact{Kind: kind, Path: path})
	return m.writeJournal(j)
}

// expectEmptyNodeDir refuses a node directory holding anything: recovery
// (rollback or committed state) must have settled it first.
func expectEmptyNodeDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "reading %s", dir)
	}
	if len(entries) > 0 {
		names := make([]string, len(entries))
		for i, e := range entries {
			names[i] = e.Name()
		}
		return exitcode.New(exitcode.Conflict, "unfinished node directory %s holds files without a readable prepare record (%v); move them away, then retry", dir, names).
			WithReason("unfinished_node_directory")
	}
	return nil
}

// copyNew copies src to a new 0600 file dst (never overwriting).
func copyNew(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return exitcode.Wrap(exitcode.Capability, err, "opening UEFI vars template")
	}
	defer in.Close()
	tmp := filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-"+uuid.NewString()[:8])
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "creating %s", tmp)
	}
	defer os.Remove(tmp)
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return exitcode.Wrap(exitcode.Runtime, err, "copying %s", src)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return exitcode.Wrap(exitcode.Runtime, err, "fsync %s", tmp)
	}
	if err := out.Close(); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "closing %s", tmp)
	}
	if err := os.Link(tmp, dst); err != nil {
		return exitcode.Wrap(exitcode.Conflict, err, "publishing %s", dst)
	}
	return nil
}
