package lifecycle

import (
	"context"
	"sort"
	"strings"

	"github.com/google/uuid"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/nodedir"
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
	res := m.newResult("destroy")
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
	names, done, err := m.destroySelection(d, selectors, o, res)
	if err != nil {
		return nil, err
	}
	if done {
		return res, nil
	}
	all, err := m.Root.WithNodeLocks(ctx, lock, m.Command, true, names)
	if err != nil {
		return nil, err // the deployment lock is released with them
	}
	lock = all
	destroyed := m.destroyNodes(ctx, names, o.DeletePersistent || o.Purge, res)
	m.faultNotes(d, destroyed, res)
	whole := len(selectors) == 0
	if len(res.Failures) > 0 && (whole || len(destroyed) == 0) {
		res.sort()
		return res, res.Err(len(names))
	}
	if whole {
		err = m.destroyDeployment(o, res)
	} else if d != nil {
		err = m.dropDestroyed(d, destroyed, res)
	}
	if err != nil {
		return nil, err
	}
	res.sort()
	if len(res.Failures) > 0 {
		// Selected nodes that were destroyed left the applied spec above;
		// the ones that failed are still in it.
		return res, res.Err(len(names))
	}
	return res, nil
}

// destroySelection resolves the nodes to destroy: every applied node and
// node directory when selectors is empty, else the selectors, each of
// which must be one of those (usage, unknown_node). done is true when
// there is nothing at all to destroy (res says so).
func (m *Manager) destroySelection(d *state.Deployment, selectors []string, o DestroyOptions, res *Result) (names []string, done bool, err error) {
	dirs, err := m.Root.NodeNames()
	if err != nil {
		return nil, false, err
	}
	known := map[string]bool{}
	for _, n := range dirs {
		known[n] = true
	}
	if d != nil {
		for _, n := range d.Spec.Nodes {
			known[n.Name] = true
		}
	}
	all := make([]string, 0, len(known))
	for k := range known {
		all = append(all, k)
	}
	sort.Strings(all)
	if len(selectors) > 0 {
		for _, s := range selectors {
			if !known[s] {
				return nil, false, exitcode.New(exitcode.Usage, "unknown node %q; known nodes: %s", s, strings.Join(all, ", ")).
					WithReason("unknown_node").WithNext("barn-node status")
			}
		}
		return slicesSorted(selectors), false, nil
	}
	if len(all) == 0 && d == nil {
		if (o.Purge || o.DeletePersistent) && !o.purge {
			return nil, false, exitcode.New(exitcode.Conflict, "no deployment to destroy; retained disks and keys are removed by purge").
				WithReason("no_deployment").WithNext("barn-node purge")
		}
		res.Notes = append(res.Notes, "no deployment; nothing to destroy")
		return nil, !o.Purge && !o.DeletePersistent, nil
	}
	return all, false, nil
}

func slicesSorted(in []string) []string {
	out := append([]string(nil), in...)
	sort.Strings(out)
	return out
}

// destroyNodes destroys names (bounded in parallel) and removes the node
// locks of the destroyed ones, which it returns.
func (m *Manager) destroyNodes(ctx context.Context, names []string, deletePersistent bool, res *Result) map[string]bool {
	m.runBatch(len(names), func(i int) {
		nr, err := m.destroyNode(ctx, names[i], deletePersistent, res)
		if err != nil {
			res.fail(names[i], "destroy", err)
			return
		}
		res.addNode(*nr)
	})
	destroyed := map[string]bool{}
	for _, nr := range res.Nodes {
		destroyed[nr.Name] = true
		if err := m.Root.RemoveNodeLock(nr.Name); err != nil {
			res.fail(nr.Name, "destroy", err)
		}
	}
	return destroyed
}

// destroyDeployment ends a whole-deployment destroy: the applied
// deployment and the emptied nodes/ go; with DeletePersistent or Purge
// the retained disks Barn can prove it preserved; with Purge the keys
// Barn created and, last, the event log.
func (m *Manager) destroyDeployment(o DestroyOptions, res *Result) error {
	if err := m.Root.RemoveDeployment(); err != nil {
		return err
	}
	dirs := m.nodeDirs()
	dirs.RemoveNodesDir()
	if o.DeletePersistent || o.Purge {
		gone, kept, err := dirs.DeleteRetained()
		for _, g := range gone {
			res.Notes = append(res.Notes, "deleted retained disk "+g)
		}
		for _, k := range kept {
			res.Notes = append(res.Notes, "kept "+k)
		}
		if err != nil {
			return err
		}
	}
	if !o.Purge {
		return nil
	}
	if err := m.purgeKeys(res); err != nil {
		return err
	}
	// The event log is the deployment's history: purge removes it last
	// and writes nothing after it.
	m.eventsOff = true
	return m.Root.RemoveEvents()
}

// dropDestroyed drops the destroyed nodes from the applied spec (a new
// generation), so a plan made before the destroy is stale; a destroyed
// control node hands the role to the first remaining node
// (promoteControl).
func (m *Manager) dropDestroyed(d *state.Deployment, destroyed map[string]bool, res *Result) error {
	kept := d.Spec
	kept.Nodes = []spec.Node{}
	for _, n := range d.Spec.Nodes {
		if !destroyed[n.Name] {
			kept.Nodes = append(kept.Nodes, n)
		}
	}
	if note := promoteControl(&kept, d.Spec.Control); note != "" {
		m.logf("%s", note)
		res.Notes = append(res.Notes, note)
	}
	kept.Seal()
	nd := &state.Deployment{Schema: state.DeploymentSchema, Generation: d.Generation + 1, Spec: kept}
	if err := m.Root.WriteDeployment(nd); err != nil {
		return err
	}
	res.Generation = nd.Generation
	return nil
}

// Purge is destroy --force --purge: idempotent without a deployment; it
// also removes provably owned retained disks and the keys.
func (m *Manager) Purge(ctx context.Context) (*Result, error) {
	if !m.Root.Exists() {
		r := m.newResult("purge")
		r.Notes = append(r.Notes, "no deployment; nothing to purge")
		return r, nil
	}
	r, err := m.Destroy(ctx, nil, DestroyOptions{Purge: true, purge: true})
	if r != nil {
		r.Command = "purge"
	}
	return r, err
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

// destroyNode destroys one node, resumably (nodedir.Destroy):
//
//	transaction (from → destroying) → phase destroying → verified stop →
//	preserve each persistent disk → remove the node's own files →
//	remove state, transaction and the emptied node directory.
//
// Only files the node state records are removed, and each only while it
// is the very file Barn created (its identity in n.Files): anything else
// at those names and any unexpected file (an operator's notes.txt) is
// kept, blocks the directory removal and is named with the reason.
func (m *Manager) destroyNode(ctx context.Context, name string, deletePersistent bool, res *Result) (*NodeResult, error) {
	absent := &NodeResult{Name: name, Phase: string(state.Absent), Action: "destroyed", Warnings: []Warning{}, Repairs: []string{}}
	dirs := m.nodeDirs()
	docs, err := m.Root.ReadNodeDocuments(name)
	if err != nil {
		return nil, err
	}
	n := docs.State
	if n == nil {
		rec, err := dirs.SettleForDestroy(name, docs)
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
		if err := dirs.FinishCommitted(n, docs.Journal); err != nil {
			return nil, err
		}
	}
	absent.Address, absent.Image, absent.Accel = n.Spec.Address, ImageLabel(n.Image), n.Accel
	d, resumed, err := dirs.BeginDestroy(n, docs.Transaction, uuid.NewString())
	if err != nil {
		return nil, err
	}
	if resumed {
		m.logf("%s: resuming an interrupted destroy (%d step(s) done)", name, len(d.T.Completed))
	}
	if err := m.stopForDestroy(ctx, n, d); err != nil {
		return nil, err
	}
	files := []string{n.RootDisk, n.Seed, n.NVRAM, n.SerialLog}
	if _, ok := n.Files[state.QEMULogName]; ok {
		files = append(files, m.Root.NodeFile(n.Node, state.QEMULogName))
	}
	for _, dd := range n.DataDisks {
		if !dd.Persistent || deletePersistent {
			files = append(files, dd.Path)
			continue
		}
		if moved, err := d.Preserve(dd); err != nil {
			return nil, err
		} else if moved {
			res.retained(name + "/" + dd.Name)
		}
	}
	if err := d.RemoveArtifacts(files); err != nil {
		return nil, err
	}
	return absent, d.Finish()
}

// stopForDestroy stops n through the verified ladder unless the destroy
// already recorded step "stopped", and records phase destroying.
func (m *Manager) stopForDestroy(ctx context.Context, n *state.Node, d *nodedir.Destroy) error {
	if d.Done("stopped") {
		if n.Phase == state.Destroying {
			return nil
		}
		n.Process = nil
		return m.setPhase(n, state.Destroying)
	}
	l := m.VM.Audit(ctx, n)
	if mismatch(l) {
		return exitcode.New(exitcode.Integrity, "%s: QMP answers with another identity (%v); not stopping or deleting anything", n.Node, l.QMPErr).WithReason("identity_mismatch")
	}
	// Only proven inactivity skips the stop ladder; any other QMP error
	// or live process evidence goes through it (which fails closed).
	if !l.Inactive {
		m.logf("%s: stopping before destroy", n.Node)
		if n.Phase == state.Destroying || n.Phase == state.Stopped || n.Phase == state.Prepared {
			n.Phase = state.Stopping // the VM runs: re-drive the ladder
		}
		if err := m.stop(ctx, n); err != nil {
			return err
		}
	}
	if err := m.cleanRuntime(ctx, n); err != nil {
		return err
	}
	n.Process = nil
	nodedir.RemoveRuntimeDir(n.Runtime)
	if err := m.setPhase(n, state.Destroying); err != nil {
		return err
	}
	m.hook("destroying", n.Node)
	return d.Step("stopped", n.Node)
}
