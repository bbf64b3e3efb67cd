package nodedir

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"barn.dev/lib/disk"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/state"
	"barn.dev/lib/vmrecord"
)

// Destroy is one node's resumable destroy: its transaction record
// (nodes/<node>/transaction.json, from → destroying) lists the steps
// done. Steps: "stopped" (recorded by the caller once the VM is proven
// stopped), "preserved:<disk>" for each retained persistent disk,
// "artifacts-removed"; then Finish removes the state, the record and the
// emptied directory.
type Destroy struct {
	s    *Store
	n    *state.Node
	T    *state.Transaction
	kept map[string]string // file name → why it is not Barn's
}

// BeginDestroy resumes the destroy transaction t of n when it is one
// (resumed true), else records a new one from n's phase. operationID is
// a UUID for a new record.
func (s *Store) BeginDestroy(n *state.Node, t *state.Transaction, operationID string) (d *Destroy, resumed bool, err error) {
	d = &Destroy{s: s, n: n, T: t, kept: map[string]string{}}
	if t != nil && t.To == state.Destroying {
		return d, true, nil
	}
	d.T = &state.Transaction{Schema: state.TransactionSchema, OperationID: operationID, Node: n.Node, From: n.Phase,
		To: state.Destroying, Completed: []state.TxnStep{}, StartedAt: s.now(), UpdatedAt: s.now()}
	return d, false, s.Root.WriteTransaction(d.T)
}

// Done reports whether step is recorded as done.
func (d *Destroy) Done(step string) bool { return hasStep(d.T, step) }

func hasStep(t *state.Transaction, name string) bool {
	for _, s := range t.Completed {
		if s.Name == name {
			return true
		}
	}
	return false
}

// Step records step (on resource) as done, then reports it as durable
// (the part of step before ":").
func (d *Destroy) Step(step, resource string) error {
	d.T.Completed = append(d.T.Completed, state.TxnStep{Name: step, Resource: resource})
	d.T.UpdatedAt = d.s.now()
	if err := d.s.Root.WriteTransaction(d.T); err != nil {
		return err
	}
	kind, _, _ := strings.Cut(step, ":")
	d.s.step(kind, d.n.Node)
	return nil
}

// Preserve moves the persistent data disk dd into the retained store
// (disks/<node>/<disk>/ with its ownership marker recording dd's
// definition and identity; lib/disk) unless step "preserved:<disk>" is
// done, and records that step; true when it moved the disk now. A file at
// the disk's path that is not the disk Barn created is not moved: it is
// kept (named by Finish) and false is returned.
func (d *Destroy) Preserve(dd vmrecord.DataDisk) (bool, error) {
	step := "preserved:" + dd.Name
	if d.Done(step) {
		return false, nil
	}
	name := filepath.Base(dd.Path)
	id := d.n.Files[name]
	why, err := differs(&id, dd.Path)
	if err != nil {
		return false, err
	}
	if why != "" {
		d.kept[name] = "not the disk Barn created: " + why
		return false, nil
	}
	dir, err := d.s.Root.EnsureRetainedDiskDir(d.n.Node, dd.Name)
	if err != nil {
		return false, err
	}
	fs := dd.ActualFilesystem
	if fs == "" {
		fs = dd.RequestedFilesystem
	}
	preserved := disk.Ownership{Node: d.n.Node, Name: dd.Name, Serial: dd.Serial, SizeBytes: dd.SizeBytes,
		Mount: dd.Mount, Filesystem: fs, PreservedAt: d.s.now(), Disk: &id}
	if err := disk.Preserve(dd.Path, dir, preserved); err != nil {
		return false, err
	}
	return true, d.Step(step, dir)
}

// RemoveArtifacts removes, unless step "artifacts-removed" is done, the
// given files the node state records (root overlay, seed, UEFI vars,
// serial log, data disks not preserved), each only while it is the file
// Barn created (its identity in the node state's files); anything else
// at those names is kept and named by Finish. Then it records the step.
func (d *Destroy) RemoveArtifacts(files []string) error {
	if d.Done("artifacts-removed") {
		return nil
	}
	for _, f := range files {
		if f == "" {
			continue
		}
		why, err := d.s.removeOwn(d.n, f)
		if err != nil {
			return err
		}
		if why != "" {
			d.kept[filepath.Base(f)] = why
		}
	}
	return d.Step("artifacts-removed", d.n.Node)
}

// Finish removes the node's state ("state-removed"), its transaction
// record and its directory; a directory still holding files is a
// conflict (reason unexpected_files) naming each with why it was kept.
func (d *Destroy) Finish() error {
	node := d.n.Node
	if err := d.s.Root.RemoveNode(node); err != nil {
		return err
	}
	d.s.step("state-removed", node)
	if err := d.s.Root.RemoveTransaction(node); err != nil {
		return err
	}
	return d.s.removeNodeDir(node, d.kept)
}

// removeOwn removes path, a file n records directly inside the node's
// directory, only while it is the file Barn created there (n.Files):
// otherwise it is kept and removeOwn returns why. A path outside the
// node directory is refused (integrity, path_outside_node).
func (s *Store) removeOwn(n *state.Node, path string) (kept string, err error) {
	if filepath.Dir(path) != s.Root.NodeDir(n.Node) {
		return "", exitcode.New(exitcode.Integrity, "%s: recorded file %s is outside %s; not deleting it", n.Node, path, s.Root.NodeDir(n.Node)).WithReason("path_outside_node").WithNext("barn-state verify")
	}
	id, ok := n.Files[filepath.Base(path)]
	if !ok { // state validation refuses this; never delete by name alone
		return "", exitcode.New(exitcode.Integrity, "%s: no identity is recorded for %s; not deleting it", n.Node, path).WithReason("path_outside_node").WithNext("barn-state verify")
	}
	why, err := id.Remove(path)
	if err != nil {
		return "", exitcode.Wrap(exitcode.Runtime, err, "removing %s", path)
	}
	if why != "" {
		return "not the file Barn created: " + why, nil
	}
	if id.Weak() {
		s.logf("%s: deleted %s by its device and inode only (its filesystem records no birth time or generation)", n.Node, path)
	}
	return "", nil
}

// SettleForDestroy handles a node directory without committed state: an
// uncommitted journal is rolled back; a finished destroy's leftover
// transaction is removed; an empty directory is removed.
func (s *Store) SettleForDestroy(node string, docs state.NodeDocuments) (*Recovery, error) {
	if docs.Journal != nil {
		return s.Rollback(node, docs.Journal)
	}
	if docs.Transaction != nil {
		if err := s.Root.RemoveTransaction(node); err != nil {
			return nil, err
		}
	}
	return nil, s.removeNodeDir(node, nil)
}

// DropFinishedDestroy removes the transaction record a destroy leaves
// when it is interrupted after removing the node's artifacts and state
// (its work is done: only the record and the directory remain) and
// reports whether it did. Any other record is left alone.
func (s *Store) DropFinishedDestroy(node string) (bool, error) {
	t, err := s.Root.ReadTransaction(node)
	if err != nil || t == nil || t.To != state.Destroying || !hasStep(t, "artifacts-removed") {
		return false, err
	}
	if n, err := s.Root.ReadNode(node); err != nil || n != nil {
		return false, err
	}
	if err := s.Root.RemoveTransaction(node); err != nil {
		return false, err
	}
	return true, s.removeNodeDir(node, nil)
}

// removeNodeDir removes the node's directory when it is empty. Otherwise
// every file left in it is kept and named — with the reason from kept
// when destroy kept it, else as a file Barn did not create — in a
// conflict.
func (s *Store) removeNodeDir(node string, kept map[string]string) error {
	dir := s.Root.NodeDir(node)
	err := syscall.Rmdir(dir)
	if err == nil || os.IsNotExist(err) {
		return nil
	}
	entries, _ := os.ReadDir(dir)
	var left, why []string
	for _, e := range entries {
		left = append(left, e.Name())
		if k := kept[e.Name()]; k != "" {
			why = append(why, e.Name()+": "+k)
		}
	}
	msg := fmt.Sprintf("%s: %s still holds files Barn did not create (%s); they were kept", node, dir, strings.Join(left, ", "))
	if len(why) > 0 {
		msg += " — " + strings.Join(why, "; ")
	}
	return exitcode.New(exitcode.Conflict, "%s", msg).
		WithReason("unexpected_files").WithNext("move them away, then barn-node destroy " + node)
}

// RemoveNodesDir removes nodes/ when it is empty (after a whole
// deployment's destroy); otherwise it stays.
func (s *Store) RemoveNodesDir() { _ = syscall.Rmdir(s.Root.NodesDir()) }

// RemoveRuntimeDir removes the node's runtime directory when it is empty
// (its sockets and pidfile are gone once the VM is proven stopped).
func RemoveRuntimeDir(rt vmrecord.Runtime) {
	if rt.Directory != "" {
		_ = syscall.Rmdir(rt.Directory)
	}
}

// DeleteRetained deletes every retained disk disks/ holds whose marker
// proves it the disk Barn preserved (lib/disk DeleteAll): deleted lists
// their directories, kept one line per disk left, saying why and what to
// do.
func (s *Store) DeleteRetained() (deleted, kept []string, err error) {
	root := filepath.Join(s.Root.Dir, state.DisksDirName)
	gone, left, err := disk.DeleteAll(root)
	for _, k := range left {
		kept = append(kept, k+"; next: check it and move it out of "+root+" yourself (Barn deletes only the disk it preserved)")
	}
	return gone, kept, err
}
