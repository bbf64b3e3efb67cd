package nodedir

import (
	"errors"
	"io"
	"os"
	"path/filepath"

	"barn.dev/lib/disk"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/fileid"
	"barn.dev/lib/safefile"
	"barn.dev/lib/spec"
	"barn.dev/lib/state"
	"barn.dev/lib/vmrecord"
)

// Create is one node's write-ahead create: its journal
// (nodes/<node>/prepare.json) is on disk from Begin until Commit.
type Create struct {
	s *Store
	J *state.Journal
}

// Begin starts a create of node: it makes nodes/<node>/ (0700), refuses
// it when it holds anything (conflict, reason unfinished_node_directory:
// Settle must have settled it first) and writes the journal with an
// empty completed list (step "journal"). operationID and vmUUID are
// UUIDs; specHash is the node's spec hash.
func (s *Store) Begin(node, operationID, vmUUID, specHash string) (*Create, error) {
	dir, err := s.Root.EnsureNodeDir(node)
	if err != nil {
		return nil, err
	}
	if err := expectEmpty(dir); err != nil {
		return nil, err
	}
	j := &state.Journal{Schema: state.JournalSchema, OperationID: operationID, Node: node, VMUUID: vmUUID,
		SpecHash: specHash, Completed: []state.Artifact{}, StartedAt: s.now()}
	c := &Create{s: s, J: j}
	if err := c.write(); err != nil {
		return nil, err
	}
	s.step("journal", node)
	return c, nil
}

// Path is the path of name directly inside the node's directory.
func (c *Create) Path(name string) string { return c.s.Root.NodeFile(c.J.Node, name) }

// Artifact creates the artifact of kind at path (directly inside the
// node directory), write-ahead:
//
//	journal intent → create(stage), stage being state.StagingName (a
//	name only this operation uses) → journal the stage's identity in
//	the intent → link stage to path (never replacing: a file already
//	there is a conflict, reason unexpected_files) → check path is that
//	file → move the intent to completed → remove stage.
//
// The identity is taken from the stage before the link and journaled
// before path exists, so a file at path is provably Barn's only while it
// is that identity (see Rollback): one swapped in at path after the link
// is refused (conflict, unexpected_files), never recorded. The seed's
// identity includes the SHA-256 of its bytes (nothing changes them
// afterwards).
func (c *Create) Artifact(kind state.ArtifactKind, path string, create func(stage string) error) error {
	a := state.Artifact{Kind: kind, Path: path}
	c.J.Intent = &a
	if err := c.write(); err != nil {
		return err
	}
	c.s.gap("create-"+string(kind), c.J.Node)
	stage := state.StagingName(path, c.J.OperationID)
	if err := create(stage); err != nil {
		return err
	}
	id, err := identify(kind, stage)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "recording %s", stage)
	}
	a.ID = &id
	if err := c.write(); err != nil {
		return err
	}
	c.s.gap("staged-"+string(kind), c.J.Node)
	if err := safefile.LinkNew(stage, path, state.FileMode); err != nil {
		if errors.Is(err, safefile.ErrExists) {
			return exitcode.New(exitcode.Conflict, "%s already exists; not replacing it", path).WithReason("unexpected_files")
		}
		return exitcode.Wrap(exitcode.Runtime, err, "publishing %s", path)
	}
	c.s.gap("created-"+string(kind), c.J.Node)
	if why, err := id.Differs(path); err != nil || why != "" {
		return c.notPublished(path, why, err)
	}
	if err := c.complete(a); err != nil {
		return err
	}
	if why, err := id.Remove(stage); err != nil || why != "" {
		return c.notPublished(stage, why, err)
	}
	c.s.step(string(kind), c.J.Node)
	return nil
}

// notPublished is the error for a file at path that is not (why) the
// file Artifact linked there, or err when it could not be checked.
func (c *Create) notPublished(path, why string, err error) error {
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "checking %s", path)
	}
	return exitcode.New(exitcode.Conflict, "%s is not the file Barn just published there (%s); not recording it", path, why).
		WithReason("unexpected_files").WithNext("move " + path + " out of " + filepath.Dir(path) + ", then " + c.s.again())
}

// identify is the identity recorded for a new artifact: fileid.Of, plus
// the SHA-256 for the seed, whose bytes nothing changes after Barn wrote
// them (QEMU reads it as a read-only CD-ROM).
func identify(kind state.ArtifactKind, path string) (fileid.ID, error) {
	if kind == state.Seed {
		return fileid.OfContent(path)
	}
	return fileid.Of(path)
}

// Reattach lends the retained persistent disk of d back to the node at
// dst when the store holds one (nil, nil when it holds none),
// write-ahead: the journal's intent names the disk and its store
// directory before the move, and the completed entry keeps that
// directory, whose ownership marker stays until the node's state is
// committed. A retained disk that differs from d (size, mount, serial),
// or one kept for a disk no longer declared persistent, is a conflict:
// nothing is touched.
func (c *Create) Reattach(d spec.Disk, dst string) (*disk.Ownership, error) {
	node := c.J.Node
	dir := c.s.Root.RetainedDiskDir(node, d.Name)
	own, err := disk.ReadRetained(dir)
	if err != nil || own == nil {
		return nil, err
	}
	if err := Reattachable(node, d, dir, own); err != nil {
		return nil, err
	}
	a := state.Artifact{Kind: state.DataDiskArt, Path: dst, Retained: dir}
	c.J.Intent = &a
	if err := c.write(); err != nil {
		return nil, err
	}
	c.s.gap("reattach-"+string(a.Kind), node)
	if err := disk.Reattach(dir, dst); err != nil {
		return nil, err
	}
	c.s.gap("reattached-"+string(a.Kind), node)
	a.ID = own.Disk // a rename keeps the identity the marker recorded (Reattach checked it)
	if err := c.complete(a); err != nil {
		return nil, err
	}
	c.s.step(string(a.Kind), node)
	return own, nil
}

// Reattachable refuses a retained disk own (in dir) that cannot be lent to
// node's desired disk d: d is no longer persistent (conflict, reason
// retained_disk_not_persistent) or differs in size, mount or serial
// (conflict, reason retained_disk_mismatch).
func Reattachable(node string, d spec.Disk, dir string, own *disk.Ownership) error {
	if !d.Persistent {
		return exitcode.New(exitcode.Conflict, "%s: a retained persistent disk %q exists at %s but the disk is no longer declared persistent", node, d.Name, dir).
			WithReason("retained_disk_not_persistent").WithNext("barn-node destroy --delete-persistent (whole deployment) or declare the disk persistent again")
	}
	if !own.Matches(node, d.Name, d.Serial, d.Mount, d.SizeBytes) {
		return exitcode.New(exitcode.Conflict, "%s: retained disk %q at %s does not match the desired disk (size %d bytes, mount %s, serial %s)", node, d.Name, dir, own.SizeBytes, own.Mount, own.Serial).
			WithReason("retained_disk_mismatch").WithNext("restore the disk's size and mount in the inventory, or move " + dir + " away")
	}
	return nil
}

// CheckRetained refuses, as Reattachable does, a retained persistent disk
// of node that could not be lent to the desired disk d; none retained is
// nil. Nothing is moved.
func (s *Store) CheckRetained(node string, d spec.Disk) error {
	dir := s.Root.RetainedDiskDir(node, d.Name)
	own, err := disk.ReadRetained(dir)
	if err != nil || own == nil {
		return err
	}
	return Reattachable(node, d, dir, own)
}

// Prepared records the node's invocation in the journal with
// prepared=true (step "prepared").
func (c *Create) Prepared(inv vmrecord.Invocation) error {
	c.J.Invocation = &inv
	c.J.Prepared = true
	if err := c.write(); err != nil {
		return err
	}
	c.s.step("prepared", c.J.Node)
	return nil
}

// Commit writes n (phase prepared) as the node's committed state, with
// the identity of every file the journal completed as n.Files (step
// "committed"), marks the journal committed ("journal-committed"), then
// settles it (FinishCommitted).
func (c *Create) Commit(n *state.Node) error {
	n.Files = map[string]fileid.ID{}
	for _, a := range c.J.Completed {
		n.Files[baseName(a.Path)] = *a.ID
	}
	if err := c.s.Root.WriteNode(n); err != nil {
		return err
	}
	c.s.step("committed", n.Node)
	c.J.StateCommitted = true
	c.J.StatePath = c.s.Root.NodeFile(n.Node, state.NodeStateName)
	if err := c.write(); err != nil {
		return err
	}
	c.s.step("journal-committed", n.Node)
	return c.s.FinishCommitted(n, c.J)
}

// FinishCommitted settles the journal j of a create whose node state n is
// committed: the markers of the disks it reattached (and n records) are
// released — the node state is their record now — and then the journal
// is removed. Idempotent, so a crash anywhere in it is resumed by the
// next Settle.
func (s *Store) FinishCommitted(n *state.Node, j *state.Journal) error {
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
	s.gap("released", n.Node)
	return s.Root.RemoveJournal(n.Node)
}

func (c *Create) write() error {
	c.J.UpdatedAt = c.s.now()
	return c.s.Root.WriteJournal(c.J)
}

// complete moves the intent a to the journal's completed list.
func (c *Create) complete(a state.Artifact) error {
	c.J.Intent = nil
	c.J.Completed = append(c.J.Completed, a)
	return c.write()
}

// CopyFrom is a create function for Artifact that writes a copy of src
// (the UEFI vars template) to the staging file, 0600, through Barn's one
// atomic write. A missing or unreadable template is capability (3).
func CopyFrom(src string) func(stage string) error {
	return func(stage string) error {
		in, err := os.Open(src)
		if err != nil {
			return exitcode.Wrap(exitcode.Capability, err, "opening UEFI vars template")
		}
		defer in.Close()
		out, err := safefile.Create(stage, state.FileMode)
		if err != nil {
			return exitcode.Wrap(exitcode.Runtime, err, "creating %s", stage)
		}
		defer out.Cleanup()
		if _, err := io.Copy(out, in); err != nil {
			return exitcode.Wrap(exitcode.Runtime, err, "copying %s", src)
		}
		if err := out.Commit(); err != nil {
			return exitcode.Wrap(exitcode.Runtime, err, "writing %s", stage)
		}
		return nil
	}
}
