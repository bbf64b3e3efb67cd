package lifecycle

import (
	"context"
	"slices"
	"sort"
	"strings"
	"sync"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/plan"
	"barn.dev/lib/spec"
	"barn.dev/lib/state"
)

// Recreate destroys and recreates the selected nodes from the plan's
// desired spec: the only path for definition drift. No selectors means the
// whole deployment: every node of the plan's spec (RecreateScope). Before
// stopping anything it refuses a plan that omits an applied node
// (conflict, nodes_removed), proves what the new nodes need (network,
// firmware for the boot mode, the exact image bytes, share sources,
// persistent-disk compatibility). A selection leaves its unselected peers,
// drifted or omitted, at their applied definitions (recreateSelection
// refuses what cannot stand beside them). A whole-deployment recreate
// re-checks its scope under the destruction lock: applied state that
// changed since the plan (another generation, or a node with committed
// state outside the scope) is a conflict, deployment_changed. Root and
// non-persistent disks are replaced; persistent disks are retained and
// reattached.
func (m *Manager) Recreate(ctx context.Context, p *plan.Plan, selectors []string, wait bool) (*Result, error) {
	selectors = RecreateSelectors(p, selectors)
	scope, err := RecreateScope(p, selectors)
	if err != nil {
		return nil, err
	}
	again := spec.PlanPipeline(p.Spec.Source.Inventory(), p.PlanArgs(), strings.Join(append([]string{"barn-node recreate"}, selectors...), " ")+" --force")
	if err := checkPlan(p, again); err != nil {
		return nil, err
	}
	check := func(d *state.Deployment) error { return checkBasedOn(p, d, again) }
	if len(selectors) == 0 {
		check = func(d *state.Deployment) error { return m.checkWholeScope(p, d, scope) }
	}
	lock, applied, err := m.lockPlanWith(ctx, p, check)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	names := scope
	after, err := recreateSelection(p, applied, names, m.promotedControl(applied), len(selectors) == 0)
	if err != nil {
		return nil, err
	}
	jobs, err := m.recreateJobs(ctx, p, &after, names)
	if err != nil {
		return nil, err
	}
	gen := applied.Generation + 1
	res := m.newResult("recreate")
	alloc, err := m.newPortAllocator()
	if err != nil {
		return nil, err
	}
	var keptMu sync.Mutex
	kept := map[string]bool{} // nodes whose destroy failed: they still run the old definition
	m.runBatch(len(names), func(i int) {
		job := jobs[names[i]]
		job.Generation = gen
		if !m.recreateOne(ctx, job, alloc, wait, res) {
			keptMu.Lock()
			kept[job.Node.Name] = true
			keptMu.Unlock()
		}
	})
	if err := m.Root.WriteDeployment(&state.Deployment{Schema: state.DeploymentSchema, Generation: gen, Spec: recreatedSpec(after, applied, kept)}); err != nil {
		return nil, err
	}
	res.Generation = gen
	res.sort()
	return res, res.Err(len(names))
}

// RecreateScope is the set of nodes a recreate of selectors replaces,
// sorted: the selectors, or every node of the plan's spec when there are
// none (the whole deployment). A whole-deployment plan that omits an
// applied node is a conflict (nodes_removed, the names in Detail):
// recreate never destroys by omission. A selection may leave an omitted
// peer alone: it keeps its applied definition (selectedSpec). It reads only the plan, so a command can name the scope in
// its confirmation before taking any lock.
func RecreateScope(p *plan.Plan, selectors []string) ([]string, error) {
	if selectors = RecreateSelectors(p, selectors); len(selectors) > 0 {
		return sortedUnique(selectors), nil
	}
	if mi := namesOf(p, plan.Missing); len(mi) > 0 {
		return nil, exitcode.New(exitcode.Conflict, "applied node(s) %s are absent from the desired spec; recreate never destroys by omission: restore their definition or destroy them explicitly first", strings.Join(mi, ", ")).
			WithReason("nodes_removed").WithNext("barn-node destroy " + strings.Join(mi, " ") + " --force").WithDetail(mi)
	}
	names := p.Spec.NodeNames()
	if len(names) == 0 {
		return nil, exitcode.New(exitcode.Conflict, "the plan's spec has no nodes; nothing to recreate").WithReason("no_nodes")
	}
	return sortedUnique(names), nil
}

// RecreateSelectors is the recreate's node selection: the command's
// names, or, with none, the plan's own selection (barn-plan NODE...); none
// of either is the whole deployment. A selected plan is never taken for
// the whole deployment.
func RecreateSelectors(p *plan.Plan, selectors []string) []string {
	if len(selectors) == 0 {
		return p.Selected
	}
	return selectors
}

func sortedUnique(names []string) []string {
	out := append([]string(nil), names...)
	sort.Strings(out)
	return slices.Compact(out)
}

// checkWholeScope re-checks, under the destruction lock, that the applied
// state is still the one the whole-deployment plan (and the confirmation
// naming scope) was computed against: the same generation and spec hash,
// no applied node outside scope and no node with committed state outside
// scope. Anything else is a conflict, deployment_changed, naming what
// changed.
func (m *Manager) checkWholeScope(p *plan.Plan, d *state.Deployment, scope []string) error {
	again := recreateAgain(p.Spec.Source.Inventory(), p.PlanArgs(), nil)
	if d == nil {
		return exitcode.New(exitcode.Conflict, "no deployment is applied; nothing to recreate").WithReason("no_deployment").WithNext(applyAgain(p.Spec.Source.Inventory(), p.PlanArgs()))
	}
	if p.BasedOn.Generation != d.Generation || p.BasedOn.SpecHash != d.SpecHash {
		return exitcode.New(exitcode.Conflict, "the deployment changed since the plan: generation %d was planned, generation %d is applied now; nothing was stopped", p.BasedOn.Generation, d.Generation).
			WithReason("deployment_changed").WithNext(again)
	}
	in := map[string]bool{}
	for _, n := range scope {
		in[n] = true
	}
	outside := []string{}
	for _, n := range d.Spec.NodeNames() {
		if !in[n] {
			outside = append(outside, n)
		}
	}
	dirs, err := m.Root.NodeNames()
	if err != nil {
		return err
	}
	for _, n := range dirs {
		if cur, err := m.readCommitted(n); err != nil {
			return err
		} else if cur != nil && !in[n] && !slices.Contains(outside, n) {
			outside = append(outside, n)
		}
	}
	if len(outside) > 0 {
		sort.Strings(outside)
		return exitcode.New(exitcode.Conflict, "the deployment changed since the plan: node(s) %s exist outside the recreate's scope (%s); nothing was stopped", strings.Join(outside, ", "), strings.Join(scope, ", ")).
			WithReason("deployment_changed").WithNext(again).WithDetail(outside)
	}
	return nil
}

// recreateSelection checks a recreate of names against the plan and
// returns the applied spec it leads to: a deployment is applied, each
// name is in the desired spec, and a selection keeps its unselected
// peers at their applied definitions (keepPeers).
func recreateSelection(p *plan.Plan, applied *state.Deployment, names []string, promoted string, whole bool) (spec.Spec, error) {
	src := p.Spec.Source.Inventory()
	if applied == nil {
		return spec.Spec{}, exitcode.New(exitcode.Conflict, "no deployment is applied; nothing to recreate").WithReason("no_deployment").WithNext(applyAgain(src, p.PlanArgs()))
	}
	for _, s := range names {
		if p.Spec.Node(s) == nil {
			return spec.Spec{}, exitcode.New(exitcode.Usage, "node %q is not in the desired spec", s).WithReason("unknown_node")
		}
	}
	if whole {
		return p.Spec, nil
	}
	return keepPeers(p, applied, names, promoted, "recreating", spec.PlanPipeline(src, p.OverrideArgs(), "barn-node recreate --force"))
}

// recreateJobs proves every prerequisite of the new nodes before any node
// is touched (root disk sizes, host support and network, the exact image
// bytes, share sources, persistent-disk compatibility) and returns each
// node's create job by name (generation and port still to fill).
func (m *Manager) recreateJobs(ctx context.Context, p *plan.Plan, after *spec.Spec, names []string) (map[string]createJob, error) {
	if err := refuseSmallRootDisks(p, names); err != nil {
		return nil, err
	}
	if err := m.preflight(ctx, p, names); err != nil {
		return nil, err
	}
	jobs := map[string]createJob{}
	for _, name := range names {
		np := planNode(p, name)
		if np.Image == nil {
			return nil, exitcode.New(exitcode.Usage, "plan has no exact image for %s", name).WithReason("images_unresolved").WithNext("barn-repo update && " + recreateAgain(p.Spec.Source.Inventory(), p.PlanArgs(), names))
		}
		if _, err := m.ensureBase(ctx, *np.Image, name); err != nil {
			return nil, err
		}
		n := p.Spec.Node(name)
		if err := m.checkShares(n); err != nil {
			return nil, err
		}
		if err := m.checkPersistent(name, n); err != nil {
			return nil, err
		}
		jobs[name] = createJob{Deployment: after.Deployment, Node: *n, Peers: peers(after, name), Image: *np.Image}
	}
	return jobs, nil
}

// recreateOne destroys job's node (its persistent disks retained) and
// builds it anew on its old management port when that is still free. It
// returns false when the destroy failed: the node keeps its old
// definition.
func (m *Manager) recreateOne(ctx context.Context, job createJob, alloc *portAllocator, wait bool, res *Result) bool {
	name := job.Node.Name
	old, err := m.readCommitted(name)
	if err == nil {
		_, err = m.destroyNode(ctx, name, false, res)
	}
	if err != nil {
		res.fail(name, "destroy", err)
		return false
	}
	if old != nil && old.SSHPort > 0 && m.portFree(old.SSHPort) {
		job.SSHPort = old.SSHPort
	} else if job.SSHPort, err = alloc.next(); err != nil {
		res.fail(name, "prepare", err)
		return true
	}
	m.buildNode(ctx, job, alloc, "recreated", wait, res)
	return true
}

// recreatedSpec is the applied spec after a recreate: after (the plan's
// spec, or the selection's, see selectedSpec), except that a node that
// could not be destroyed keeps its old definition, so the next plan still
// shows it as drifted instead of claiming it was rebuilt.
func recreatedSpec(after spec.Spec, applied *state.Deployment, kept map[string]bool) spec.Spec {
	out := after
	if len(kept) == 0 {
		return out
	}
	out.Nodes = append([]spec.Node(nil), after.Nodes...)
	for i, n := range out.Nodes {
		if was := applied.Spec.Node(n.Name); kept[n.Name] && was != nil {
			out.Nodes[i] = *was
		}
	}
	out.Seal()
	return out
}

// checkPersistent proves the node's current and retained persistent disks
// are compatible with the desired definition (exact identity), before
// anything is stopped.
func (m *Manager) checkPersistent(name string, want *spec.Node) error {
	cur, err := m.readCommitted(name)
	if err != nil {
		return err
	}
	desired := map[string]spec.Disk{}
	for _, d := range want.Disks {
		desired[d.Name] = d
	}
	if cur != nil {
		for _, dd := range cur.DataDisks {
			if !dd.Persistent {
				continue
			}
			d, ok := desired[dd.Name]
			if !ok || !d.Persistent || d.Serial != dd.Serial || d.SizeBytes != dd.SizeBytes || d.Mount != dd.Mount {
				return exitcode.New(exitcode.Conflict, "%s: persistent disk %q (%d bytes at %s) is not declared identically in the desired spec; recreate would orphan it", name, dd.Name, dd.SizeBytes, dd.Mount).
					WithReason("persistent_disk_changed").WithNext("restore the disk's definition, or destroy the deployment with --delete-persistent")
			}
		}
	}
	for _, d := range want.Disks {
		if err := m.nodeDirs().CheckRetained(name, d); err != nil {
			return err
		}
	}
	return nil
}
