package lifecycle

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/google/uuid"

	"barn.dev/lib/disk"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/imageref"
	"barn.dev/lib/safefile"
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

// prepare creates one node's artifacts under a write-ahead journal and
// commits its state in phase "prepared":
//
//  1. write the journal with an empty completed list;
//  2. the root overlay over the verified base;
//  3. each data disk, created or reattached from the retained store;
//  4. the seed ISO;
//  5. the UEFI vars copy for uefi images;
//  6. the invocation, prepared=true;
//  7. node state (phase prepared), then state_committed in the journal,
//     then the markers of reattached disks are released and the journal
//     is removed.
//
// Every artifact is recorded as the journal's intent before it exists and
// moved to its completed list once it does (createArtifact, reattach), so
// a crash at any point leaves only files a journal entry names. On failure
// the artifacts stay journaled for rollback (automatic on the next apply,
// or at once with --rollback).
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
	m.verifiedBase(job.Image, basePath)
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
	if err := m.createArtifact(j, state.RootOverlay, root, func(stage string) error {
		_, err := m.Disk.CreateOverlay(ctx, basePath, "qcow2", stage, job.Node.RootDiskBytes)
		return err
	}); err != nil {
		return nil, err
	}

	dataDisks := make([]state.DataDisk, 0, len(job.Node.Disks))
	for _, d := range job.Node.Disks {
		p := m.Root.NodeFile(name, state.DataDiskFileName(d.Name))
		dd := state.DataDisk{Name: d.Name, Path: p, Serial: d.Serial, SizeBytes: d.SizeBytes, Mount: d.Mount,
			Persistent: d.Persistent, RequestedFilesystem: d.FS}
		reused, err := m.reattach(j, d, p)
		if err != nil {
			return nil, err
		}
		if reused != nil {
			if fs := reused.Filesystem; fs == "xfs" || fs == "ext4" {
				dd.ActualFilesystem = fs
			}
			warnings = append(warnings, Warning{Stage: "data-disks", Detail: "reattached retained persistent disk " + reused.Name})
			dataDisks = append(dataDisks, dd)
			continue
		}
		if err := m.createArtifact(j, state.DataDiskArt, p, func(stage string) error {
			_, err := m.Disk.CreateData(ctx, stage, d.SizeBytes)
			return err
		}); err != nil {
			return nil, err
		}
		dataDisks = append(dataDisks, dd)
	}

	seed := m.Root.NodeFile(name, state.SeedName)
	if err := m.createArtifact(j, state.Seed, seed, func(stage string) error {
		return m.Seeds.WriteSeed(ctx, stage, SeedInput{Deployment: job.Deployment, Node: job.Node, Peers: job.Peers,
			Generation: job.Generation, VMUUID: vmUUID})
	}); err != nil {
		return nil, err
	}

	nvram := ""
	if job.Image.Boot == "uefi" {
		_, vars, err := m.Emu.Firmware("uefi")
		if err != nil {
			return nil, err
		}
		nvram = m.Root.NodeFile(name, state.NVRAMName)
		if err := m.createArtifact(j, state.NVRAM, nvram, func(stage string) error { return copyFile(vars, stage) }); err != nil {
			return nil, err
		}
	}

	rt, err := m.Root.EnsureNodeRuntime(name)
	if err != nil {
		return nil, err
	}
	in := LaunchInput{Node: job.Node, VMUUID: vmUUID, Image: job.Image, RootDisk: root, Base: basePath, DataDisks: dataDisks,
		Seed: seed, NVRAM: nvram, SSHPort: job.SSHPort, Runtime: rt, SerialLog: m.Root.NodeFile(name, state.SerialLogName)}
	inv, err := m.Emu.Invocation(in)
	if err != nil {
		return nil, err
	}
	j.Invocation = &inv
	j.Prepared = true
	if err := m.writeJournal(j); err != nil {
		return nil, err
	}
	m.hook("prepared", name)

	now := m.now()
	n := &state.Node{
		Schema: state.NodeSchema, Node: name, VMUUID: vmUUID, Phase: state.Prepared, Generation: job.Generation,
		SpecHash: job.Node.SpecHash, Spec: job.Node, Image: job.Image, RootDisk: root, DataDisks: dataDisks,
		Seed: seed, NVRAM: nvram, SSHPort: job.SSHPort, Accel: m.Emu.Accel(), Runtime: rt, Invocation: inv,
		Files: journaledFiles(j), CreatedAt: now, UpdatedAt: now,
	}
	if err := m.Root.WriteNode(n); err != nil {
		return nil, err
	}
	m.hook("committed", name)
	j.StateCommitted = true
	j.StatePath = m.Root.NodeFile(name, state.NodeStateName)
	if err := m.writeJournal(j); err != nil {
		return nil, err
	}
	m.hook("journal-committed", name)
	if err := m.finishCommitted(n, j); err != nil {
		return nil, err
	}
	return &prepared{Node: n, Warnings: warnings}, nil
}

// reattach lends a retained persistent disk back for d when one exists,
// write-ahead: the journal's intent names the disk and its store
// directory before the move, and the completed entry keeps that directory,
// whose ownership marker stays until the node's state is committed. A
// retained disk whose identity differs from d, or one kept for a disk no
// longer declared persistent, is a conflict: nothing is touched.
func (m *Manager) reattach(j *state.Journal, d spec.Disk, dst string) (*disk.Ownership, error) {
	node := j.Node
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
	a := state.Artifact{Kind: state.DataDiskArt, Path: dst, Retained: dir}
	j.Intent = &a
	if err := m.writeJournal(j); err != nil {
		return nil, err
	}
	m.gap("reattach-"+string(a.Kind), node)
	if err := disk.Reattach(dir, dst); err != nil {
		return nil, err
	}
	m.gap("reattached-"+string(a.Kind), node)
	// A rename keeps the identity the marker recorded (Reattach checked
	// it); a marker from before identities gives none, and the disk is
	// then never deleted by Barn.
	a.ID = own.Disk
	if err := m.complete(j, a); err != nil {
		return nil, err
	}
	m.hook(string(a.Kind), node)
	return own, nil
}

// createArtifact creates the artifact of kind at path, write-ahead:
//
//	journal intent → create under state.StagingName (a name only this
//	operation uses) → link it to path (never replacing) → journal
//	completed → remove the staging name.
//
// While the intent stands, path is provably Barn's only when it is the
// same file as the staging name (see rollback). Hooks: "create-<kind>"
// after the intent is durable, "created-<kind>" after path exists and
// before the journal records it, "<kind>" once recorded.
func (m *Manager) createArtifact(j *state.Journal, kind state.ArtifactKind, path string, create func(stage string) error) error {
	a := state.Artifact{Kind: kind, Path: path}
	j.Intent = &a
	if err := m.writeJournal(j); err != nil {
		return err
	}
	m.gap("create-"+string(kind), j.Node)
	stage := state.StagingName(path, j.OperationID)
	if err := create(stage); err != nil {
		return err
	}
	if err := safefile.LinkNew(stage, path, 0o600); err != nil {
		if errors.Is(err, safefile.ErrExists) {
			return exitcode.New(exitcode.Conflict, "%s already exists; not replacing it", path).WithReason("unexpected_files")
		}
		return exitcode.Wrap(exitcode.Runtime, err, "publishing %s", path)
	}
	m.gap("created-"+string(kind), j.Node)
	id, err := identify(kind, path)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "recording %s", path)
	}
	a.ID = &id
	if err := m.complete(j, a); err != nil {
		return err
	}
	if err := safefile.Remove(stage); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "removing %s", stage)
	}
	m.hook(string(kind), j.Node)
	return nil
}

// finishCommitted settles the journal of a create whose node state n is
// committed: the markers of the disks it reattached (and n records) are
// released — the node state is their record now — and then the journal
// is removed. Idempotent, so a crash anywhere in it is resumed by the
// next settle.
func (m *Manager) finishCommitted(n *state.Node, j *state.Journal) error {
	recorded := map[string]bool{}
	for _, dd := range n.DataDisks {
		if dd.Persistent {
			recorded[dd.Path] = true
		}
	}
	for _, a := range j.Completed {
		if a.Retained == "" || !recorded[a.Path] {
			continue
		}
		if err := disk.Release(a.Retained); err != nil {
			return err
		}
	}
	m.gap("released", n.Node)
	return m.Root.RemoveJournal(n.Node)
}

func (m *Manager) writeJournal(j *state.Journal) error {
	j.UpdatedAt = m.now()
	return m.Root.WriteJournal(j)
}

// complete moves the intent a to the journal's completed list.
func (m *Manager) complete(j *state.Journal, a state.Artifact) error {
	j.Intent = nil
	j.Completed = append(j.Completed, a)
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

// copyFile writes a copy of the UEFI vars template src to dst, 0600,
// through Barn's one atomic write.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return exitcode.Wrap(exitcode.Capability, err, "opening UEFI vars template")
	}
	defer in.Close()
	out, err := safefile.Create(dst, 0o600)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "creating %s", dst)
	}
	defer out.Cleanup()
	if _, err := io.Copy(out, in); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "copying %s", src)
	}
	if err := out.Commit(); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "writing %s", dst)
	}
	return nil
}
