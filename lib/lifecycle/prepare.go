package lifecycle

import (
	"context"

	"github.com/google/uuid"

	"barn.dev/lib/imageref"
	"barn.dev/lib/nodedir"
	"barn.dev/lib/spec"
	"barn.dev/lib/state"
	"barn.dev/lib/vmrecord"
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
}

// prepared is the outcome of a successful prepare: the committed node state
// (phase prepared) ready for launch, plus any warnings.
type prepared struct {
	Node     *state.Node
	Warnings []Warning
}

// nodeDirs is the one owner of the node directories (lib/nodedir), with
// this Manager's hook, progress stream, clock and retry hint.
func (m *Manager) nodeDirs() *nodedir.Store {
	return &nodedir.Store{Root: m.Root, Log: m.Log, Now: m.now, Again: m.applyAgain,
		Hook: func(step, node string, durable bool) {
			if durable {
				m.hook(step, node)
			} else {
				m.gap(step, node)
			}
		}}
}

// prepare creates one node's artifacts under a write-ahead journal
// (nodedir.Create) and commits its state in phase "prepared":
//
//  1. the journal with an empty completed list;
//  2. the root overlay over the verified base;
//  3. each data disk, created or reattached from the retained store;
//  4. the seed ISO;
//  5. the UEFI vars copy for uefi images;
//  6. the invocation, prepared=true;
//  7. node state (phase prepared), then state_committed in the journal,
//     then the markers of reattached disks are released and the journal
//     is removed.
//
// A crash at any point leaves only files a journal entry names. On
// failure the artifacts stay journaled for rollback (automatic on the
// next apply, or at once with --rollback).
func (m *Manager) prepare(ctx context.Context, job createJob) (*prepared, error) {
	name := job.Node.Name
	// Share sources first: a missing or unsafe one fails this node before
	// any artifact exists (launch re-opens them).
	if err := m.checkShares(&job.Node); err != nil {
		return nil, err
	}
	basePath, err := m.ensureBase(ctx, job.Image, name)
	if err != nil {
		return nil, err
	}
	m.verifiedBase(job.Image, basePath)
	vmUUID := uuid.NewString()
	c, err := m.nodeDirs().Begin(name, uuid.NewString(), vmUUID, job.Node.SpecHash)
	if err != nil {
		return nil, err
	}
	n := &state.Node{Schema: state.NodeSchema, Node: name, VMUUID: vmUUID, Phase: state.Prepared, Generation: job.Generation,
		SpecHash: job.Node.SpecHash, Spec: job.Node, Image: job.Image, SSHPort: job.SSHPort, Accel: m.Emu.Accel(job.Image.Arch)}
	warnings, err := m.createDisks(ctx, c, job, basePath, n)
	if err != nil {
		return nil, err
	}
	if err := m.createBootFiles(ctx, c, job, n); err != nil {
		return nil, err
	}
	if n.Runtime, err = m.Root.EnsureNodeRuntime(name); err != nil {
		return nil, err
	}
	if n.Invocation, err = m.Emu.Invocation(m.launchInput(n, basePath)); err != nil {
		return nil, err
	}
	if err := c.Prepared(n.Invocation); err != nil {
		return nil, err
	}
	n.CreatedAt = m.now()
	n.UpdatedAt = n.CreatedAt
	if err := c.Commit(n); err != nil {
		return nil, err
	}
	return &prepared{Node: n, Warnings: warnings}, nil
}

// createDisks creates the root overlay over base and each data disk, or
// reattaches a retained persistent one, recording them in n.
func (m *Manager) createDisks(ctx context.Context, c *nodedir.Create, job createJob, base string, n *state.Node) ([]Warning, error) {
	n.RootDisk = c.Path(state.RootDiskName)
	// Exactly the size the spec records: a disk below the image's virtual
	// size was refused before anything was pulled (refuseSmallRootDisks),
	// and CreateOverlay refuses it again rather than grow it.
	if err := c.Artifact(state.RootOverlay, n.RootDisk, func(stage string) error {
		_, err := m.Disk.CreateOverlay(ctx, base, "qcow2", stage, job.Node.RootDiskBytes)
		return err
	}); err != nil {
		return nil, err
	}
	var warnings []Warning
	n.DataDisks = make([]vmrecord.DataDisk, 0, len(job.Node.Disks))
	for _, d := range job.Node.Disks {
		dd := vmrecord.DataDisk{Name: d.Name, Path: c.Path(state.DataDiskFileName(d.Name)), Serial: d.Serial, SizeBytes: d.SizeBytes,
			Mount: d.Mount, Persistent: d.Persistent, RequestedFilesystem: d.FS}
		reused, err := c.Reattach(d, dd.Path)
		switch {
		case err != nil:
			return nil, err
		case reused != nil:
			if fs := reused.Filesystem; fs == "xfs" || fs == "ext4" {
				dd.ActualFilesystem = fs
			}
			warnings = append(warnings, Warning{Stage: "data-disks", Detail: "reattached retained persistent disk " + reused.Name})
		default:
			if err := c.Artifact(state.DataDiskArt, dd.Path, func(stage string) error {
				_, err := m.Disk.CreateData(ctx, stage, d.SizeBytes)
				return err
			}); err != nil {
				return nil, err
			}
		}
		n.DataDisks = append(n.DataDisks, dd)
	}
	return warnings, nil
}

// createBootFiles writes the empty serial log QEMU will write, the seed
// ISO and, for a uefi image, the copy of the firmware's vars template,
// recording them in n.
func (m *Manager) createBootFiles(ctx context.Context, c *nodedir.Create, job createJob, n *state.Node) error {
	n.SerialLog = c.Path(state.SerialLogName)
	if err := c.Artifact(state.SerialLogArt, n.SerialLog, nodedir.EmptyFile); err != nil {
		return err
	}
	n.Seed = c.Path(state.SeedName)
	if err := c.Artifact(state.Seed, n.Seed, func(stage string) error {
		return m.Seeds.WriteSeed(ctx, stage, SeedInput{Deployment: job.Deployment, Node: job.Node, Peers: job.Peers,
			Generation: job.Generation, VMUUID: n.VMUUID})
	}); err != nil {
		return err
	}
	if job.Image.Boot != "uefi" {
		return nil
	}
	_, vars, err := m.Emu.Firmware(job.Image)
	if err != nil {
		return err
	}
	n.NVRAM = c.Path(state.NVRAMName)
	return c.Artifact(state.NVRAM, n.NVRAM, nodedir.CopyFrom(vars))
}
