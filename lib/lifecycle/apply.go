package lifecycle

import (
	"context"
	"sort"
	"strings"
	"sync"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/plan"
	"barn.dev/lib/spec"
	"barn.dev/lib/state"
)

// ApplyOptions are apply's flags.
type ApplyOptions struct {
	NoWait   bool // skip guest readiness
	Rollback bool // remove the artifacts of nodes that failed to prepare in this run
	// Nodes applies only these nodes of the plan; none means every node
	// of the plan (itself a selection when barn-plan was given nodes).
	Nodes []string
}

// applyAgain is the next: hint that plans the spec's inventory afresh,
// with planArgs (a plan's selection and overrides, kept so that the hint
// does what the user asked for), and applies it (spec.PlanPipeline: it
// works as printed).
func applyAgain(source string, planArgs []string) string {
	return spec.PlanPipeline(source, planArgs, "barn-node apply")
}

// appliedSource is the inventory the applied deployment was resolved
// from ("" when none is applied or it cannot be read: the hints then use
// discovery).
func (m *Manager) appliedSource() string {
	d, err := m.Root.ReadDeployment()
	if err != nil || d == nil {
		return ""
	}
	return d.Spec.Source.Inventory()
}

// applyAgain is applyAgain for the applied deployment's inventory.
func (m *Manager) applyAgain() string { return applyAgain(m.appliedSource(), nil) }

// recreateAgain plans the spec's inventory afresh, with planArgs, and
// recreates names. A hint that drops a plan's overrides would recreate a
// node without the change the user asked for: plan-bound hints pass
// p.PlanArgs().
func recreateAgain(source string, planArgs, names []string) string {
	return spec.PlanPipeline(source, planArgs, strings.Join(append([]string{"barn-node recreate"}, names...), " ")+" --force")
}

// checkPlan validates a plan document's own consistency; again is the
// command that makes a fresh one.
func checkPlan(p *plan.Plan, again string) error {
	if p.Schema != plan.Schema {
		return exitcode.New(exitcode.Usage, "plan: schema %q, expected %s", p.Schema, plan.Schema)
	}
	if got := spec.DeploymentHash(&p.Spec); got != p.Spec.SpecHash {
		return exitcode.New(exitcode.Usage, "plan: spec_hash %q does not match its spec (%s)", p.Spec.SpecHash, got).WithReason("plan_hash_mismatch").WithNext(again)
	}
	for _, n := range p.Spec.Nodes {
		if got := spec.NodeHash(p.Spec.Deployment, n); got != n.SpecHash {
			return exitcode.New(exitcode.Usage, "plan: node %s spec_hash does not match its definition", n.Name).WithReason("plan_hash_mismatch").WithNext(again)
		}
	}
	for _, np := range p.Nodes {
		if np.Outcome != plan.Missing && p.Spec.Node(np.Name) == nil {
			return exitcode.New(exitcode.Usage, "plan: node %s (%s) is not in the plan's spec", np.Name, np.Outcome)
		}
	}
	return nil
}

// checkBasedOn refuses a plan computed against other applied state.
func checkBasedOn(p *plan.Plan, d *state.Deployment, again string) error {
	var gen int64
	var hash string
	if d != nil {
		gen, hash = d.Generation, d.SpecHash
	}
	if p.BasedOn.Generation != gen || p.BasedOn.SpecHash != hash {
		return exitcode.New(exitcode.Conflict, "the plan was computed against applied generation %d but generation %d is applied now", p.BasedOn.Generation, gen).
			WithReason("stale_plan").WithNext(again)
	}
	return nil
}

// refuseSmallRootDisks refuses, before anything is pulled or written, a
// plan whose nodes to build ask for a root disk below their exact image's
// virtual size (plan.RootDiskTooSmall; barn-plan blocks on the same rule).
// Usage (2), reason root_disk_too_small.
func refuseSmallRootDisks(p *plan.Plan, names []string) error {
	var found []string
	for _, name := range names {
		if msg := plan.RootDiskTooSmall(p.Spec.Node(name), planNode(p, name).Image); msg != "" {
			found = append(found, msg)
		}
	}
	if len(found) == 0 {
		return nil
	}
	return exitcode.New(exitcode.Usage, "%s", strings.Join(found, "; ")).WithReason("root_disk_too_small").WithDetail(found)
}

func namesOf(p *plan.Plan, o plan.Outcome) []string {
	var out []string
	for _, n := range p.Nodes {
		if n.Outcome == o {
			out = append(out, n.Name)
		}
	}
	sort.Strings(out)
	return out
}

// lockForPlan checks that p is a well-formed plan, takes the deployment
// lock (waiting, as every modifying command does) and the locks of the
// plan's nodes, reads the applied deployment (nil when none) and refuses a
// stale plan (conflict, reason stale_plan); again is the caller's command
// for a fresh plan (the next: hint of those refusals). The caller must
// Unlock on success.
func (m *Manager) lockForPlan(ctx context.Context, p *plan.Plan, again string) (state.Lock, *state.Deployment, error) {
	if err := checkPlan(p, again); err != nil {
		return nil, nil, err
	}
	return m.lockPlanWith(ctx, p, func(d *state.Deployment) error { return checkBasedOn(p, d, again) })
}

// lockPlanWith takes the deployment lock and the locks of the plan's
// nodes, reads the applied deployment and refuses it with check (called
// under the locks; nil applied when none).
func (m *Manager) lockPlanWith(ctx context.Context, p *plan.Plan, check func(*state.Deployment) error) (state.Lock, *state.Deployment, error) {
	lock, err := m.Root.LockDeployment(ctx, m.Command, true, m.Waiting)
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, 0, len(p.Nodes))
	for _, n := range p.Nodes {
		names = append(names, n.Name)
	}
	if lock, err = m.Root.WithNodeLocks(ctx, lock, m.Command, true, names); err != nil {
		return nil, nil, err
	}
	applied, err := m.Root.ReadDeployment()
	if err == nil {
		err = check(applied)
	}
	if err != nil {
		_ = lock.Unlock()
		return nil, nil, err
	}
	return lock, applied, nil
}

// Apply applies a barn.plan/v1 under the deployment lock: it refuses a
// stale plan, any resize or recreate outcome and any missing node, settles
// interrupted creates, creates `create` nodes (prepared in parallel,
// bounded), starts `start` nodes without touching running peers, and
// records the new applied spec (generation+1 when it changed). A
// selection (o.Nodes, or a plan barn-plan computed for named nodes)
// applies only those nodes: every other node keeps its applied
// definition, drifted or omitted (keepPeers refuses what cannot stand
// beside them). Node failures are listed in the result; the returned
// error's class is exitcode.BatchClass over every node applied (partial
// (5) when successful or kept peers remain).
func (m *Manager) Apply(ctx context.Context, p *plan.Plan, o ApplyOptions) (*Result, error) {
	// The hints keep the plan's selection and overrides.
	again := spec.PlanPipeline(p.Spec.Source.Inventory(), p.PlanArgs(), "barn-node apply")
	p, err := scopePlan(p, o.Nodes)
	if err != nil {
		return nil, err
	}
	lock, applied, err := m.lockForPlan(ctx, p, again)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	if err := refuseApply(p); err != nil {
		return nil, err
	}
	whole := spec.PlanPipeline(p.Spec.Source.Inventory(), p.OverrideArgs(), "barn-node apply")
	after, err := appliedAfter(p, applied, m.promotedControl(applied), whole)
	if err != nil {
		return nil, err
	}
	gen := nextGeneration(applied, after.SpecHash)
	res := m.newResult("apply")
	creates, starts := namesOf(p, plan.Create), namesOf(p, plan.Start)
	if len(creates) > 0 {
		if err := m.preflight(ctx, p, creates); err != nil {
			return nil, err
		}
	}
	// Record the applied spec before creating anything: a crash from here
	// on leaves applied nodes without committed state, which the next plan
	// classifies as create (and their journals roll back).
	if applied == nil || applied.SpecHash != after.SpecHash {
		if err := m.Root.WriteDeployment(&state.Deployment{Schema: state.DeploymentSchema, Generation: gen, Spec: after}); err != nil {
			return nil, err
		}
	}
	alloc, err := m.newPortAllocator()
	if err != nil {
		return nil, err
	}
	jobs := m.createJobs(p, &after, creates, gen, alloc, again, res)
	m.runBatch(len(jobs), func(i int) {
		if !m.buildNode(ctx, jobs[i], alloc, "created", !o.NoWait, res) && o.Rollback {
			m.rollbackNow(jobs[i].Node.Name, res)
		}
	})
	m.startBatch(ctx, starts, alloc, !o.NoWait, res)
	m.keptNodes(p, res)
	res.Generation = gen
	res.sort()
	// Every node of the plan counts: a kept node succeeded too, so one
	// failed create beside kept peers is partial (5), never that create's
	// class alone.
	return res, res.Err(len(creates) + len(starts) + len(namesOf(p, plan.Unchanged)))
}

// nextGeneration is the deployment generation after applying a spec with
// hash specHash over applied: 1 for the first apply, one more when the
// spec changes.
func nextGeneration(applied *state.Deployment, specHash string) int64 {
	if applied == nil {
		return 1
	}
	if applied.SpecHash != specHash {
		return applied.Generation + 1
	}
	return applied.Generation
}

// scopePlan is p restricted to the named nodes (p itself when none are
// named), marked as a selection. A name the plan does not hold is usage
// (unknown_node), naming the plan's nodes.
func scopePlan(p *plan.Plan, names []string) (*plan.Plan, error) {
	if len(names) == 0 {
		return p, nil
	}
	q := *p
	q.Nodes = nil
	for _, name := range sortedUnique(names) {
		np := planNode(p, name)
		if np.Name == "" {
			var known []string
			for _, n := range p.Nodes {
				known = append(known, n.Name)
			}
			return nil, exitcode.New(exitcode.Usage, "node %q is not in the plan; the plan's nodes: %s", name, strings.Join(known, ", ")).
				WithReason("unknown_node").WithNext(spec.Pipeline(p.Spec.Source.Inventory(), "") + " --text")
		}
		q.Nodes = append(q.Nodes, np)
	}
	q.Selected = sortedUnique(names)
	return &q, nil
}

// appliedAfter is the applied spec after applying p: the plan's spec for
// a plan of the whole deployment, else the applied spec with the
// selected nodes' definitions (keepPeers). whole is the command that
// applies every node.
func appliedAfter(p *plan.Plan, applied *state.Deployment, promoted, whole string) (spec.Spec, error) {
	if len(p.Selected) == 0 {
		return p.Spec, nil
	}
	var names []string
	for _, np := range p.Nodes {
		if np.Outcome != plan.Missing {
			names = append(names, np.Name)
		}
	}
	return keepPeers(p, applied, names, promoted, "applying", whole)
}

// refuseApply refuses a plan with missing nodes (apply never destroys by
// omission), recreate outcomes (apply never recreates), resize outcomes
// (apply never stops a running node to change it) or root disks below
// their image (before anything is pulled or written).
func refuseApply(p *plan.Plan) error {
	if mi := namesOf(p, plan.Missing); len(mi) > 0 {
		return exitcode.New(exitcode.Conflict, "applied node(s) %s are absent from the desired spec; apply never destroys by omission: restore their definition or destroy them explicitly", strings.Join(mi, ", ")).
			WithReason("nodes_removed").WithNext("barn-node destroy " + strings.Join(mi, " ") + " --force").WithDetail(mi)
	}
	if rc := namesOf(p, plan.Recreate); len(rc) > 0 {
		return exitcode.New(exitcode.Conflict, "node definition changed for %s; apply never recreates a node", strings.Join(rc, ", ")).
			WithReason("recreate_required").WithNext(spec.PlanPipeline(p.Spec.Source.Inventory(), p.PlanArgs(), "barn-node recreate "+strings.Join(rc, " ")+" --force")).WithDetail(rc)
	}
	if rs := namesOf(p, plan.Resize); len(rs) > 0 {
		return exitcode.New(exitcode.Conflict, "vCPUs, memory or root disk size changed for %s; apply never resizes a node", strings.Join(rs, ", ")).
			WithReason("resize_required").WithNext(spec.PlanPipeline(p.Spec.Source.Inventory(), p.PlanArgs(), "barn-node resize "+strings.Join(rs, " ")+" --force")).WithDetail(rs)
	}
	return refuseSmallRootDisks(p, namesOf(p, plan.Create))
}

// createJobs settles each node to create (an interrupted create is rolled
// back) and allocates its port, sequentially under the lock; a node that
// cannot be created fails in res and gets no job.
func (m *Manager) createJobs(p *plan.Plan, after *spec.Spec, creates []string, gen int64, alloc *portAllocator, again string, res *Result) []createJob {
	var jobs []createJob
	for _, name := range creates {
		rec, err := m.nodeDirs().Settle(name)
		if err != nil {
			res.fail(name, "prepare", err)
			continue
		}
		res.recovered(rec)
		if rec.Committed != nil {
			res.fail(name, "prepare", exitcode.New(exitcode.Conflict, "%s already has committed state (phase %s)", name, rec.Committed.Phase).WithReason("stale_plan").WithNext(again))
			continue
		}
		np := planNode(p, name)
		if np.Image == nil {
			res.fail(name, "prepare", exitcode.New(exitcode.Usage, "plan has no exact image for %s", name).WithReason("images_unresolved").WithNext("barn-repo update && "+again))
			continue
		}
		port, err := alloc.next()
		if err != nil {
			res.fail(name, "prepare", err)
			continue
		}
		jobs = append(jobs, createJob{Deployment: after.Deployment, Node: *p.Spec.Node(name), Peers: peers(after, name), Image: *np.Image,
			Generation: gen, SSHPort: port})
	}
	return jobs
}

// buildNode is the one node-build path of apply and recreate: prepare
// job's node, launch it and (with wait) wait for readiness and verify its
// root's growth at first boot (verifyRoot), recording the node as action,
// or its failure, in res. It returns false when prepare
// failed (nothing was launched).
func (m *Manager) buildNode(ctx context.Context, job createJob, alloc *portAllocator, action string, wait bool, res *Result) bool {
	name := job.Node.Name
	m.logf("%s: preparing (image %s)", name, ImageLabel(job.Image))
	pr, err := m.prepare(ctx, job)
	if err != nil {
		res.fail(name, "prepare", err)
		return false
	}
	nr := nodeResult(pr.Node, action)
	nr.Warnings = append(nr.Warnings, pr.Warnings...)
	repairs, err := m.launch(ctx, pr.Node, alloc)
	nr.Repairs = append(nr.Repairs, repairs...)
	nr.Phase, nr.Ports.SSH = string(pr.Node.Phase), pr.Node.SSHPort
	if err != nil {
		res.fail(name, "start", err)
	} else if err := m.waitReady(ctx, pr.Node, wait, &nr); err != nil {
		res.fail(name, "readiness", err)
	} else if err := m.verifyRoot(ctx, pr.Node, wait, &nr); err != nil {
		res.fail(name, "verify", err)
	}
	res.addNode(nr)
	return true
}

// keptNodes reports the plan's unchanged nodes as kept.
func (m *Manager) keptNodes(p *plan.Plan, res *Result) {
	for _, np := range p.Nodes {
		if np.Outcome != plan.Unchanged {
			continue
		}
		n, err := m.readCommitted(np.Name)
		if err != nil {
			res.fail(np.Name, "apply", err)
		} else if n != nil {
			res.addNode(nodeResult(n, "kept"))
		}
	}
}

// rollbackNow removes the journaled artifacts of a node that failed to
// prepare in this run (--rollback).
func (m *Manager) rollbackNow(name string, res *Result) {
	docs, err := m.Root.ReadNodeDocuments(name)
	switch {
	case err != nil:
		m.logf("%s: not rolling back: %v", name, err) // damaged evidence proves nothing
		return
	case docs.Journal == nil || docs.State != nil:
		return // nothing journaled, or committed after all: never rolled back
	}
	rec, err := m.nodeDirs().Rollback(name, docs.Journal)
	res.recovered(rec)
	if err != nil {
		m.logf("%s: rollback: %v", name, err)
	}
}

// startBatch starts the named committed nodes, bounded in parallel.
func (m *Manager) startBatch(ctx context.Context, names []string, alloc *portAllocator, wait bool, res *Result) {
	m.runBatch(len(names), func(i int) {
		name := names[i]
		nr, stage, err := m.startOne(ctx, name, alloc, wait)
		if nr != nil {
			res.addNode(*nr)
		}
		if err != nil {
			res.fail(name, stage, err)
		}
	})
}

// startOne converges and starts one committed node. Running nodes are left
// alone (reported "already-running"). A node it found ready, launched or
// already running, has its root's growth verified (stage "verify":
// verifyRoot).
func (m *Manager) startOne(ctx context.Context, name string, alloc *portAllocator, wait bool) (*NodeResult, string, error) {
	n, err := m.readCommitted(name)
	if err != nil {
		return nil, "start", err
	}
	if n == nil {
		return nil, "start", exitcode.New(exitcode.Usage, "node %s has no committed state", name).WithReason("unknown_node").WithNext(m.applyAgain())
	}
	obs := m.observe(ctx, n, true)
	if obs.Converged != "" {
		m.logf("%s", obs.Converged)
	}
	if obs.Err != nil {
		nr := nodeResult(n, "none")
		return &nr, "status", obs.Err
	}
	if n.Phase == state.Running {
		nr := nodeResult(n, "already-running")
		if err := m.waitReady(ctx, n, wait, &nr); err != nil {
			return &nr, "readiness", err
		}
		// a resize killed after it launched the node left a growth no
		// start verified yet
		if err := m.verifyRoot(ctx, n, wait, &nr); err != nil {
			return &nr, "verify", err
		}
		return &nr, "", nil
	}
	repairs, err := m.launch(ctx, n, alloc)
	nr := nodeResult(n, "started")
	nr.Repairs = append(nr.Repairs, repairs...)
	if err != nil {
		return &nr, "start", err
	}
	if err := m.waitReady(ctx, n, wait, &nr); err != nil {
		return &nr, "readiness", err
	}
	if err := m.verifyRoot(ctx, n, wait, &nr); err != nil {
		return &nr, "verify", err
	}
	return &nr, "", nil
}

// runBatch runs f(0..n-1) with at most m.concurrency(n) in flight.
func (m *Manager) runBatch(n int, f func(i int)) {
	if n == 0 {
		return
	}
	sem := make(chan struct{}, m.concurrency(n))
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			f(i)
		}(i)
	}
	wg.Wait()
}

func planNode(p *plan.Plan, name string) plan.NodePlan {
	for _, n := range p.Nodes {
		if n.Name == name {
			return n
		}
	}
	return plan.NodePlan{}
}

func peers(s *spec.Spec, name string) []spec.Node {
	out := []spec.Node{}
	for _, n := range s.Nodes {
		if n.Name != name {
			out = append(out, n)
		}
	}
	return out
}

// preflight proves the host can run the named new nodes before anything
// is downloaded, created or destroyed: the plan's images boot one way (as
// barn-plan checked), each node's exact image can be launched here
// (architecture, and UEFI firmware for a uefi image), then the private
// network (unless the test-only "none" profile is active). A node without
// an exact image is left to the caller's per-node check.
func (m *Manager) preflight(ctx context.Context, p *plan.Plan, names []string) error {
	if err := plan.CheckBootModes(p.Nodes); err != nil {
		return err
	}
	for _, name := range names {
		if np := planNode(p, name); np.Image != nil {
			if err := m.Emu.Supports(*np.Image); err != nil {
				return err
			}
		}
	}
	if m.Net != nil && m.Emu.PrivateNet() != "none" {
		if err := m.Net.Preflight(ctx, p.Spec.Deployment.Subnet.CIDR); err != nil {
			return err
		}
	}
	return nil
}
