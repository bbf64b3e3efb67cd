package lifecycle

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/google/uuid"

	"barn.dev/lib/disk"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/fileid"
	"barn.dev/lib/spec"
	"barn.dev/lib/sshkeys"
	"barn.dev/lib/state"
)

// DestroyOptions are destroy's flags (confirmation happens in the CLI).
type DestroyOptions struct {
	DeletePersistent bool // whole deployment only: also delete retained persistent disks
	Purge            bool // whole deployment only: also keys and deployment state
	purge            bool // called as `purge`: idempotent without a deployment
}

// Destroy removes the selected nodes (the whole deployment when none are
// named). Persistent data disks are moved to the retained store with an
// ownership marker unless DeletePersistent/Purge. It never infers deletion
// from a plan; it resumes an interrupted destroy from the node's
// transaction record; with no deployment it succeeds.
func (m *Manager) Destroy(ctx context.Context, selectors []string, o DestroyOptions) (*Result, error) {
	if (o.DeletePersistent || o.Purge) && len(selectors) > 0 {
		return nil, exitcode.New(exitcode.Usage, "--delete-persistent and --purge apply to the whole deployment only; they take no node names").
			WithReason("whole_deployment_only").WithNext("barn-node destroy " + strings.Join(selectors, " "))
	}
	res := newResult("destroy")
	if !m.Root.Exists() {
		res.Notes = append(res.Notes, "no deployment; nothing to destroy")
		return res, nil
	}
	lock, err := m.Root.LockDeployment(ctx, m.Command, true, m.Waiting)
	if err != nil {
		return nil, err
	}
	defer func() { _ = lock.Unlock() }() // lock grows to include the node locks
	d, err := m.Root.ReadDeployment()
	if err != nil {
		return nil, err
	}
	dirs, err := m.Root.NodeNames()
	if err != nil {
		return nil, err
	}
	whole := len(selectors) == 0
	var names []string
	if whole {
		set := map[string]bool{}
		if d != nil {
			for _, n := range d.Spec.Nodes {
				set[n.Name] = true
			}
		}
		for _, n := range dirs {
			set[n] = true
		}
		for n := range set {
			names = append(names, n)
		}
		if len(names) == 0 && d == nil {
			if (o.Purge || o.DeletePersistent) && !o.purge {
				return nil, exitcode.New(exitcode.Conflict, "no deployment to destroy; retained disks and keys are removed by purge").
					WithReason("no_deployment").WithNext("barn-node purge")
			}
			res.Notes = append(res.Notes, "no deployment; nothing to destroy")
			if !o.Purge && !o.DeletePersistent {
				return res, nil
			}
		}
	} else {
		known := map[string]bool{}
		for _, n := range dirs {
			known[n] = true
		}
		if d != nil {
			for _, n := range d.Spec.Nodes {
				known[n.Name] = true
			}
		}
		for _, s := range selectors {
			if !known[s] {
				all := make([]string, 0, len(known))
				for k := range known {
					all = append(all, k)
				}
				sort.Strings(all)
				return nil, exitcode.New(exitcode.Usage, "unknown node %q; known nodes: %s", s, strings.Join(all, ", ")).
					WithReason("unknown_node").WithNext("barn-node status")
			}
			names = append(names, s)
		}
	}
	sort.Strings(names)
	all, err := m.Root.WithNodeLocks(ctx, lock, m.Command, true, names)
	if err != nil {
		return nil, err // the deployment lock is released with them
	}
	lock = all
	destroyed := map[string]bool{}
	m.runBatch(len(names), func(i int) {
		name := names[i]
		nr, err := m.destroyNode(ctx, name, o.DeletePersistent || o.Purge, res)
		if err != nil {
			res.fail(name, "destroy", err)
			return
		}
		res.addNode(*nr)
	})
	for _, nr := range res.Nodes {
		destroyed[nr.Name] = true
		if err := m.Root.RemoveNodeLock(nr.Name); err != nil {
			res.fail(nr.Name, "destroy", err)
		}
	}
	if len(res.Failures) > 0 && (whole || len(destroyed) == 0) {
		res.sort()
		return res, res.Err(len(names))
	}
	if whole {
		if err := m.removeDeployment(); err != nil {
			return nil, err
		}
		_ = syscall.Rmdir(m.Root.NodesDir()) // only when empty
		if o.DeletePersistent || o.Purge {
			gone, kept, err := disk.DeleteAll(filepath.Join(m.Root.Dir, state.DisksDirName))
			for _, g := range gone {
				res.Notes = append(res.Notes, "deleted retained disk "+g)
			}
			for _, k := range kept {
				res.Notes = append(res.Notes, "kept "+k+"; next: check it and move it out of "+filepath.Join(m.Root.Dir, state.DisksDirName)+" yourself (Barn deletes only the disk it preserved)")
			}
			if err != nil {
				return nil, err
			}
		}
		if o.Purge {
			if err := m.purgeKeys(res); err != nil {
				return nil, err
			}
			// The event log is the deployment's history: purge removes it
			// last and writes nothing after it.
			m.eventsOff = true
			if err := m.Root.RemoveEvents(); err != nil {
				return nil, err
			}
		}
	} else if d != nil {
		// Drop the destroyed nodes from the applied spec so a plan made
		// before the destroy is stale.
		kept := d.Spec
		kept.Nodes = nil
		for _, n := range d.Spec.Nodes {
			if !destroyed[n.Name] {
				kept.Nodes = append(kept.Nodes, n)
			}
		}
		if kept.Nodes == nil {
			kept.Nodes = []spec.Node{}
		}
		kept.Seal()
		nd := &state.Deployment{Schema: state.DeploymentSchema, Generation: d.Generation + 1, Spec: kept}
		if err := m.Root.WriteDeployment(nd); err != nil {
			return nil, err
		}
		res.Generation = nd.Generation
	}
	res.sort()
	if len(res.Failures) > 0 {
		// Selected nodes that were destroyed left the applied spec above;
		// the ones that failed are still in it.
		return res, res.Err(len(names))
	}
	return res, nil
}

// Purge is destroy --force --purge: idempotent without a deployment; it
// also removes provably owned retained disks and the keys.
func (m *Manager) Purge(ctx context.Context) (*Result, error) {
	if !m.Root.Exists() {
		r := newResult("purge")
		r.Notes = append(r.Notes, "no deployment; nothing to purge")
		return r, nil
	}
	r, err := m.Destroy(ctx, nil, DestroyOptions{Purge: true, purge: true})
	if r != nil {
		r.Command = "purge"
	}
	return r, err
}

func (m *Manager) removeDeployment() error {
	if _, err := os.Lstat(m.Root.DeploymentFile()); os.IsNotExist(err) {
		return nil
	}
	return state.RemoveFileDurable(m.Root.DeploymentFile())
}

// purgeKeys removes the key files the keys record proves Barn created
// (sshkeys.Purge), then the emptied keys dir; any other file at those
// names is kept and named in the result's notes.
func (m *Manager) purgeKeys(res *Result) error {
	removed, kept, err := sshkeys.Purge(m.Root.KeysDir())
	if err != nil {
		return err
	}
	if len(removed) > 0 {
		res.Notes = append(res.Notes, "deleted deployment keys")
	}
	for _, k := range kept {
		res.Notes = append(res.Notes, "kept "+k+": not a file Barn recorded creating")
	}
	return nil
}

func hasStep(t *state.Transaction, name string) bool {
	for _, s := range t.Completed {
		if s.Name == name {
			return true
		}
	}
	return false
}

func (m *Manager) step(t *state.Transaction, name, resource, node string) error {
	t.Completed = append(t.Completed, state.TxnStep{Name: name, Resource: resource})
	t.UpdatedAt = m.now()
	if err := m.Root.WriteTransaction(t); err != nil {
		return err
	}
	kind, _, _ := strings.Cut(name, ":")
	m.hook(kind, node)
	return nil
}

// destroyNode destroys one node, resumably:
//
//	transaction (from → destroying) → phase destroying → verified stop →
//	preserve each persistent disk → remove the node's own files →
//	remove state, transaction and the emptied node directory.
//
// Only files the node state records are removed, and each only while it
// is the very file Barn created (its identity in n.Files): anything else
// at those names — a file copied or restored over Barn's, a file recorded
// before Barn kept identities — and any unexpected file (an operator's
// qemu.log, a serial.log of a node never started) is kept, blocks the
// directory removal and is named with the reason.
func (m *Manager) destroyNode(ctx context.Context, name string, deletePersistent bool, res *Result) (*NodeResult, error) {
	absent := &NodeResult{Name: name, Phase: string(state.Absent), Action: "destroyed", Warnings: []Warning{}, Repairs: []string{}}
	docs, err := m.Root.ReadNodeDocuments(name)
	if err != nil {
		return nil, err
	}
	n := docs.State
	if n == nil {
		rec, err := m.settleForDestroy(name, docs)
		if err != nil {
			return nil, err
		}
		res.recovered(rec)
		if rec == nil || len(rec.RolledBack)+len(rec.Returned) == 0 {
			absent.Action = "already-absent"
		}
		return absent, nil
	}
	if docs.Journal != nil {
		// a create committed this state but crashed before settling its journal
		if err := m.finishCommitted(n, docs.Journal); err != nil {
			return nil, err
		}
	}
	absent.Address, absent.Image, absent.Accel = n.Spec.Address, ImageLabel(n.Image), n.Accel
	t := docs.Transaction
	if t == nil || t.To != state.Destroying {
		t = &state.Transaction{Schema: state.TransactionSchema, OperationID: uuid.NewString(), Node: name, From: n.Phase,
			To: state.Destroying, Completed: []state.TxnStep{}, StartedAt: m.now(), UpdatedAt: m.now()}
		if err := m.Root.WriteTransaction(t); err != nil {
			return nil, err
		}
	} else {
		m.logf("%s: resuming an interrupted destroy (%d step(s) done)", name, len(t.Completed))
	}
	if !hasStep(t, "stopped") {
		l := m.VM.Audit(ctx, n)
		if mismatch(l) {
			return nil, exitcode.New(exitcode.Integrity, "%s: QMP answers with another identity (%v); not stopping or deleting anything", name, l.QMPErr).WithReason("identity_mismatch")
		}
		// Only proven inactivity skips the stop ladder; any other QMP error
		// or live process evidence goes through it (which fails closed).
		if !l.Inactive {
			m.logf("%s: stopping before destroy", name)
			if n.Phase == state.Destroying || n.Phase == state.Stopped || n.Phase == state.Prepared {
				n.Phase = state.Stopping // the VM runs: re-drive the ladder
			}
			if err := m.stop(ctx, n); err != nil {
				return nil, err
			}
		}
		if err := m.cleanRuntime(ctx, n); err != nil {
			return nil, err
		}
		n.Process = nil
		if n.Runtime.Directory != "" {
			_ = syscall.Rmdir(n.Runtime.Directory)
		}
		if err := m.setPhase(n, state.Destroying); err != nil {
			return nil, err
		}
		m.hook("destroying", name)
		if err := m.step(t, "stopped", name, name); err != nil {
			return nil, err
		}
	} else if n.Phase != state.Destroying {
		n.Process = nil
		if err := m.setPhase(n, state.Destroying); err != nil {
			return nil, err
		}
	}
	kept := map[string]string{} // file name → why it is not Barn's
	for _, dd := range n.DataDisks {
		if !dd.Persistent || deletePersistent {
			continue
		}
		stepName := "preserved:" + dd.Name
		if hasStep(t, stepName) {
			continue
		}
		var id *fileid.ID
		if rec, ok := n.Files[filepath.Base(dd.Path)]; ok {
			id = &rec
			// Another file at the disk's path is not moved into the store.
			if why, err := rec.Differs(dd.Path); err != nil && !fileid.Missing(err) {
				return nil, exitcode.Wrap(exitcode.Runtime, err, "checking %s", dd.Path)
			} else if why != "" {
				kept[filepath.Base(dd.Path)] = "not the disk Barn created: " + why
				continue
			}
		}
		dir, err := m.Root.EnsureRetainedDiskDir(name, dd.Name)
		if err != nil {
			return nil, err
		}
		fs := dd.ActualFilesystem
		if fs == "" {
			fs = dd.RequestedFilesystem
		}
		if err := disk.Preserve(dd.Path, dir, disk.Ownership{Node: name, Name: dd.Name, Serial: dd.Serial, SizeBytes: dd.SizeBytes,
			Mount: dd.Mount, Filesystem: fs, PreservedAt: m.now(), Disk: id}); err != nil {
			return nil, err
		}
		res.retained(name + "/" + dd.Name)
		if err := m.step(t, stepName, dir, name); err != nil {
			return nil, err
		}
	}
	if !hasStep(t, "artifacts-removed") {
		// Only files the node state records: Barn never creates qemu.log,
		// and serial.log is QEMU's only once a launch recorded it.
		files := []string{n.RootDisk, n.Seed, n.NVRAM, n.SerialLog}
		for _, dd := range n.DataDisks {
			if !dd.Persistent || deletePersistent {
				files = append(files, dd.Path)
			}
		}
		for _, f := range files {
			why, err := m.removeOwn(n, f)
			if err != nil {
				return nil, err
			}
			if why != "" {
				kept[filepath.Base(f)] = why
			}
		}
		if err := m.step(t, "artifacts-removed", name, name); err != nil {
			return nil, err
		}
	}
	if err := m.Root.RemoveNode(name); err != nil {
		return nil, err
	}
	m.hook("state-removed", name)
	if err := m.Root.RemoveTransaction(name); err != nil {
		return nil, err
	}
	if err := m.removeNodeDir(name, kept); err != nil {
		return nil, err
	}
	return absent, nil
}

// settleForDestroy handles a node directory without committed state: an
// uncommitted journal is rolled back; a finished destroy's leftover
// transaction is removed; an empty directory is removed.
func (m *Manager) settleForDestroy(name string, docs state.NodeDocuments) (*recovery, error) {
	if docs.Journal != nil {
		return m.rollback(name, docs.Journal)
	}
	if docs.Transaction != nil {
		if err := m.Root.RemoveTransaction(name); err != nil {
			return nil, err
		}
	}
	return nil, m.removeNodeDir(name, nil)
}

// dropFinishedDestroy removes the transaction record a destroy leaves
// when it is interrupted after removing the node's artifacts and state
// (its work is done: only the record and the directory remain) and
// reports whether it did. Any other record is left alone.
func (m *Manager) dropFinishedDestroy(name string) (bool, error) {
	t, err := m.Root.ReadTransaction(name)
	if err != nil || t == nil || t.To != state.Destroying || !hasStep(t, "artifacts-removed") {
		return false, err
	}
	if n, err := m.Root.ReadNode(name); err != nil || n != nil {
		return false, err
	}
	if err := m.Root.RemoveTransaction(name); err != nil {
		return false, err
	}
	return true, m.removeNodeDir(name, nil)
}

// removeOwn removes path, a file n records directly inside the node's
// directory, only while it is the file Barn created there (n.Files):
// otherwise it is kept and removeOwn returns why. A path outside the
// node directory is refused.
func (m *Manager) removeOwn(n *state.Node, path string) (kept string, err error) {
	if path == "" {
		return "", nil
	}
	if filepath.Dir(path) != m.Root.NodeDir(n.Node) {
		return "", exitcode.New(exitcode.Integrity, "%s: recorded file %s is outside %s; not deleting it", n.Node, path, m.Root.NodeDir(n.Node)).WithReason("path_outside_node").WithNext("barn-state verify")
	}
	id, ok := n.Files[filepath.Base(path)]
	if !ok {
		if _, err := os.Lstat(path); os.IsNotExist(err) {
			return "", nil
		} else if err != nil {
			return "", exitcode.Wrap(exitcode.Runtime, err, "checking %s", path)
		}
		return "recorded before Barn kept file identities, so nothing proves it is the file Barn created", nil
	}
	why, err := id.Remove(path)
	if err != nil {
		return "", exitcode.Wrap(exitcode.Runtime, err, "removing %s", path)
	}
	if why != "" {
		return "not the file Barn created: " + why, nil
	}
	if id.Weak() {
		m.logf("%s: deleted %s by its device and inode only (its filesystem records no birth time or generation)", n.Node, path)
	}
	return "", nil
}

// removeNodeDir removes the node's directory when it is empty. Otherwise
// every file left in it is kept and named — with the reason from kept
// when destroy kept it, else as a file Barn did not create — in a
// conflict.
func (m *Manager) removeNodeDir(name string, kept map[string]string) error {
	dir := m.Root.NodeDir(name)
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
	msg := fmt.Sprintf("%s: %s still holds files Barn did not create (%s); they were kept", name, dir, strings.Join(left, ", "))
	if len(why) > 0 {
		msg += " — " + strings.Join(why, "; ")
	}
	return exitcode.New(exitcode.Conflict, "%s", msg).
		WithReason("unexpected_files").WithNext("move them away, then barn-node destroy " + name)
}
