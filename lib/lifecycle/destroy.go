package lifecycle

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/google/uuid"

	"barn.dev/lib/disk"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/spec"
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
			gone, err := disk.DeleteAll(filepath.Join(m.Root.Dir, state.DisksDirName))
			for _, g := range gone {
				res.Notes = append(res.Notes, "deleted retained disk "+g)
			}
			if err != nil {
				return nil, err
			}
		}
		if o.Purge {
			if err := m.purgeKeys(); err != nil {
				return nil, err
			}
			res.Notes = append(res.Notes, "deleted deployment keys")
			// The event log is the deployment's history: purge removes it
			// last and writes nothing after it.
			m.eventsOff = true
			if err := state.RemoveFileDurable(m.Root.EventsFile()); err != nil {
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

// purgeKeys removes only Barn's own key files, then the emptied keys dir.
func (m *Manager) purgeKeys() error {
	dir := m.Root.KeysDir()
	for _, name := range []string{state.PrivateKeyName, state.PublicKeyName, state.KnownHostsName} {
		p := filepath.Join(dir, name)
		fi, err := os.Lstat(p)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil || !fi.Mode().IsRegular() {
			return exitcode.New(exitcode.Integrity, "%s is not a regular file; not deleting it", p)
		}
		if err := os.Remove(p); err != nil {
			return exitcode.Wrap(exitcode.Runtime, err, "removing %s", p)
		}
	}
	if err := syscall.Rmdir(dir); err != nil && !os.IsNotExist(err) {
		return exitcode.Wrap(exitcode.Runtime, err, "removing %s (unexpected entries are kept)", dir)
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
// Only files the node state names (plus logs) are removed; an unexpected
// file blocks the directory removal and is reported.
func (m *Manager) destroyNode(ctx context.Context, name string, deletePersistent bool, res *Result) (*NodeResult, error) {
	absent := &NodeResult{Name: name, Phase: string(state.Absent), Action: "destroyed", Warnings: []Warning{}, Repairs: []string{}}
	n, err := m.Root.ReadNode(name)
	if err != nil {
		return nil, err
	}
	if n == nil {
		rec, err := m.settleForDestroy(name)
		if err != nil {
			return nil, err
		}
		res.rolledBack(rec...)
		if len(rec) == 0 {
			absent.Action = "already-absent"
		}
		return absent, nil
	}
	absent.Address, absent.Image, absent.Accel = n.Spec.Address, ImageLabel(n.Image), n.Accel
	t, err := m.Root.ReadTransaction(name)
	if err != nil {
		return nil, err
	}
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
	for _, dd := range n.DataDisks {
		if !dd.Persistent || deletePersistent {
			continue
		}
		stepName := "preserved:" + dd.Name
		if hasStep(t, stepName) {
			continue
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
			Mount: dd.Mount, Filesystem: fs, PreservedAt: m.now()}); err != nil {
			return nil, err
		}
		res.retained(name + "/" + dd.Name)
		if err := m.step(t, stepName, dir, name); err != nil {
			return nil, err
		}
	}
	if !hasStep(t, "artifacts-removed") {
		files := []string{n.RootDisk, n.Seed, n.NVRAM, m.Root.NodeFile(name, state.SerialLogName), m.Root.NodeFile(name, state.QEMULogName)}
		for _, dd := range n.DataDisks {
			if !dd.Persistent || deletePersistent {
				files = append(files, dd.Path)
			}
		}
		for _, f := range files {
			if err := m.removeOwn(name, f); err != nil {
				return nil, err
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
	if err := m.removeNodeDir(name); err != nil {
		return nil, err
	}
	return absent, nil
}

// settleForDestroy handles a node directory without committed state: an
// uncommitted journal is rolled back; a finished destroy's leftover
// transaction is removed; an empty directory is removed.
func (m *Manager) settleForDestroy(name string) ([]string, error) {
	j, err := m.Root.ReadJournal(name)
	if err != nil {
		return nil, err
	}
	if j != nil {
		return m.rollback(name, j)
	}
	if t, err := m.Root.ReadTransaction(name); err != nil {
		return nil, err
	} else if t != nil {
		if err := m.Root.RemoveTransaction(name); err != nil {
			return nil, err
		}
	}
	return nil, m.removeNodeDir(name)
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
	return true, m.removeNodeDir(name)
}

// removeOwn removes path when it is a regular file directly inside the
// node's directory; anything else is refused.
func (m *Manager) removeOwn(node, path string) error {
	if path == "" {
		return nil
	}
	if filepath.Dir(path) != m.Root.NodeDir(node) {
		return exitcode.New(exitcode.Integrity, "%s: recorded file %s is outside %s; not deleting it", node, path, m.Root.NodeDir(node)).WithReason("path_outside_node").WithNext("barn-state verify")
	}
	fi, err := os.Lstat(path)
	if os.IsNotExist(err) {
		return nil
	} else if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "checking %s", path)
	}
	if !fi.Mode().IsRegular() {
		return exitcode.New(exitcode.Integrity, "%s is not a regular file (%s); not deleting it", path, fi.Mode()).WithReason("unexpected_files")
	}
	if err := os.Remove(path); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "removing %s", path)
	}
	return nil
}

func (m *Manager) removeNodeDir(name string) error {
	dir := m.Root.NodeDir(name)
	err := syscall.Rmdir(dir)
	if err == nil || os.IsNotExist(err) {
		return nil
	}
	entries, _ := os.ReadDir(dir)
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	return exitcode.New(exitcode.Conflict, "%s: %s still holds files Barn did not create (%s); they were kept", name, dir, strings.Join(left, ", ")).
		WithReason("unexpected_files").WithNext("move them away, then barn-node destroy " + name)
}
