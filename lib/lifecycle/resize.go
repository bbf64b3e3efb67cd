package lifecycle

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"sync"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/plan"
	"barn.dev/lib/qemu"
	"barn.dev/lib/spec"
	"barn.dev/lib/state"
)

// Resize applies the plan's resize outcomes (plan.Resize: vCPUs, memory,
// a larger root disk) to the selected nodes, every resize node of the
// plan when none are named, keeping each node's VM UUID, disks, SSH keys,
// seed and NVRAM. Before it stops anything it proves, for every selected
// node, that its committed definition differs from the desired one only
// in those fields, that no root disk would shrink (usage,
// disk_shrink_refused; qemu-img must read the overlay), that a running
// node's guest can grow its root (conflict, root_layout_unsupported; with
// a probe) and that its share sources open. Then, per node: a running
// node is stopped (the verified stop ladder), the root overlay grows
// offline (qemu-img resize; the guest's growpart and resize_rootfs grow
// the partition and filesystem at the next boot), the new definition is
// committed, and a node that ran is started again, which verifies the
// growth (runtime, root_not_grown; see verifyRoot: a node resized while
// stopped is verified by its next start). Every step is idempotent and
// the committed node state is the record: a resize interrupted at any
// step is finished by running it again, or by the apply the next plan
// names once the definition is committed (see the hooks "stopped",
// "root-grown", "resized").
//
// The applied spec is written first, carrying the new definitions of the
// selected nodes and the applied definitions of every other node, and
// written again without those whose resize failed before its commit.
func (m *Manager) Resize(ctx context.Context, p *plan.Plan, selectors []string, wait bool) (*Result, error) {
	src := p.Spec.Source.Inventory()
	cmd := "barn-node resize " + strings.Join(cmpNames(selectors, namesOf(p, plan.Resize)), " ") + " --force"
	if !m.Hotplug {
		cmd += " --no-hotplug" // a stop/start resize resumes as one (hot-plug is the default)
	}
	again := spec.PlanPipeline(src, p.PlanArgs(), cmd)
	lock, applied, err := m.lockForPlan(ctx, p, again)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	names, err := resizeSelection(p, applied, selectors)
	if err != nil {
		return nil, err
	}
	olds, err := m.resizeChecks(ctx, p, names)
	if err != nil {
		return nil, err
	}
	gen := applied.Generation + 1
	if err := m.Root.WriteDeployment(&state.Deployment{Schema: state.DeploymentSchema, Generation: gen, Spec: resizedSpec(p, applied, names)}); err != nil {
		return nil, err
	}
	alloc, err := m.newPortAllocator()
	if err != nil {
		return nil, err
	}
	res := m.newResult("resize")
	var mu sync.Mutex
	var committed []string
	m.runBatch(len(names), func(i int) {
		if m.resizeOne(ctx, olds[names[i]], *p.Spec.Node(names[i]), alloc, wait, res) {
			mu.Lock()
			committed = append(committed, names[i])
			mu.Unlock()
		}
	})
	if len(committed) < len(names) {
		if err := m.Root.WriteDeployment(&state.Deployment{Schema: state.DeploymentSchema, Generation: gen, Spec: resizedSpec(p, applied, committed)}); err != nil {
			return nil, err
		}
	}
	res.Generation = gen
	res.sort()
	return res, res.Err(len(names))
}

// cmpNames is selectors, or fallback when none were given.
func cmpNames(selectors, fallback []string) []string {
	if len(selectors) > 0 {
		return selectors
	}
	return fallback
}

// resizeSelection checks a resize of selectors against the plan: a
// deployment is applied and every selected node's outcome is resize
// (conflict, reason not_resizable, naming the command its outcome needs).
// No selectors means every resize node of the plan; a plan without any is
// usage (no_selection). It returns the selection sorted.
func resizeSelection(p *plan.Plan, applied *state.Deployment, selectors []string) ([]string, error) {
	src := p.Spec.Source.Inventory()
	if applied == nil {
		return nil, exitcode.New(exitcode.Conflict, "no deployment is applied; nothing to resize").WithReason("no_deployment").WithNext(applyAgain(src, p.PlanArgs()))
	}
	if len(selectors) == 0 {
		selectors = namesOf(p, plan.Resize)
		if len(selectors) == 0 {
			return nil, exitcode.New(exitcode.Usage, "the plan resizes no node").WithReason("no_selection").WithNext(spec.Pipeline(src, "") + " --text")
		}
	}
	seen := map[string]bool{}
	var names []string
	for _, s := range selectors {
		np := planNode(p, s)
		if np.Name == "" {
			return nil, exitcode.New(exitcode.Usage, "node %q is not in the plan", s).WithReason("unknown_node").WithNext(spec.Pipeline(src, "") + " --text")
		}
		if np.Outcome != plan.Resize {
			next := spec.Pipeline(src, "") + " --text"
			if np.Outcome == plan.Recreate {
				next = recreateAgain(src, p.PlanArgs(), []string{s})
			}
			return nil, exitcode.New(exitcode.Conflict, "node %s is %s in the plan, not resize; resize changes only vCPUs, memory and a larger root disk", s, np.Outcome).
				WithReason("not_resizable").WithNext(next)
		}
		if !seen[s] {
			seen[s] = true
			names = append(names, s)
		}
	}
	sort.Strings(names)
	return names, nil
}

// resizeChecks proves, before any node is stopped, that each named node
// can be resized as the plan says, and returns its committed state by
// name: the committed definition with the desired vCPUs, memory and root
// disk is the desired definition (conflict, not_resizable), no root disk
// shrinks against the definition or the overlay's virtual size (usage,
// disk_shrink_refused), a running node's root layout is one its guest
// grows (checkRootLayout, when the root disk grows), and the node could
// start again (restartable: a resize that is not a hot-plug stops it, and
// an arm64 node has no hot-plug headroom).
func (m *Manager) resizeChecks(ctx context.Context, p *plan.Plan, names []string) (map[string]*state.Node, error) {
	src := p.Spec.Source.Inventory()
	olds := map[string]*state.Node{}
	for _, name := range names {
		c, err := m.readCommitted(name)
		if err != nil {
			return nil, err
		}
		if c == nil {
			return nil, exitcode.New(exitcode.Conflict, "%s has no committed state; the plan is stale", name).WithReason("stale_plan").WithNext(resizeAgain(src, p.PlanArgs(), names))
		}
		if err := m.restartable(ctx, c); err != nil {
			return nil, err
		}
		want := p.Spec.Node(name)
		moved := c.Spec
		moved.CPUs, moved.MemoryBytes, moved.RootDiskBytes = want.CPUs, want.MemoryBytes, want.RootDiskBytes
		if spec.NodeHash(p.Spec.Deployment, moved) != want.SpecHash || c.SpecHash != spec.NodeHash(p.Spec.Deployment, c.Spec) {
			return nil, exitcode.New(exitcode.Conflict, "%s: the committed definition differs from the desired one beyond vCPUs, memory and root disk size", name).
				WithReason("not_resizable").WithNext(recreateAgain(src, p.PlanArgs(), []string{name}))
		}
		if err := m.checkRootGrowth(ctx, c, want.RootDiskBytes, resizeAgain(src, p.PlanArgs(), []string{name}), recreateAgain(src, p.PlanArgs(), []string{name})); err != nil {
			return nil, err
		}
		if want.RootDiskBytes != c.Spec.RootDiskBytes {
			if err := m.checkRootLayout(ctx, c, recreateAgain(src, p.PlanArgs(), []string{name})); err != nil {
				return nil, err
			}
		}
		olds[name] = c
	}
	return olds, nil
}

// checkRootGrowth refuses a root disk that would shrink (usage,
// disk_shrink_refused), comparing with the committed definition and, when
// the size changes, with the overlay's virtual size as qemu-img reads it
// (which also proves qemu-img works before anything stops). The hint is
// recreate (the recreate of c with the plan's selection and overrides),
// except for an overlay larger than the committed definition: a resize
// interrupted after it grew the overlay ("root-grown") and then abandoned
// left it so, and growing to at least the overlay's size (again, the
// resize pipeline to run after editing the inventory) loses nothing.
func (m *Manager) checkRootGrowth(ctx context.Context, c *state.Node, size int64, again, recreate string) error {
	if size == c.Spec.RootDiskBytes {
		return nil
	}
	if size < c.Spec.RootDiskBytes {
		return exitcode.New(exitcode.Usage, "%s: the root disk would shrink from %d to %d bytes; Barn never shrinks a disk (only recreate makes a new, smaller one)", c.Node, c.Spec.RootDiskBytes, size).
			WithReason("disk_shrink_refused").WithNext(recreate)
	}
	info, err := m.Disk.Inspect(ctx, c.RootDisk)
	if err != nil {
		return err
	}
	if size < info.VirtualSize {
		return exitcode.New(exitcode.Usage, "%s: the root overlay is already %d bytes, more than the committed %d bytes: a resize interrupted after it grew the overlay was not finished; growing to %d bytes would shrink it, and Barn never shrinks a disk", c.Node, info.VirtualSize, c.Spec.RootDiskBytes, size).
			WithReason("disk_shrink_refused").WithNext("set vm_disk of " + c.Node + " to at least " + vmDiskValue(info.VirtualSize) + " and run " + again + " (keeps the disk); or discard the root disk: " + recreate)
	}
	return nil
}

// vmDiskValue is bytes as an inventory vm_disk value: whole GiB or MiB
// when exact, else bytes.
func vmDiskValue(bytes int64) string {
	switch {
	case bytes%(1<<30) == 0:
		return strconv.FormatInt(bytes>>30, 10) + "GiB"
	case bytes%(1<<20) == 0:
		return strconv.FormatInt(bytes>>20, 10) + "MiB"
	}
	return strconv.FormatInt(bytes, 10) + "B"
}

// resizeOne resizes one node from committed state c to definition want:
// stop when it runs, grow the root overlay, commit, start again when it
// ran. It returns whether the new definition was committed.
func (m *Manager) resizeOne(ctx context.Context, c *state.Node, want spec.Node, alloc *portAllocator, wait bool, res *Result) bool {
	name := c.Node
	obs := m.observe(ctx, c, true)
	if obs.Converged != "" {
		m.logf("%s", obs.Converged)
	}
	if obs.Err != nil {
		res.addNode(nodeResult(c, "none"))
		res.fail(name, "status", obs.Err)
		return false
	}
	ran, oldRoot := c.Phase == state.Running, c.Spec.RootDiskBytes
	if ran && m.Hotplug && hotpluggable(c, want) {
		if handled, ok := m.hotplugOne(ctx, c, want, res); handled {
			return ok
		}
	}
	repairs, stage, err := m.resizeStopped(ctx, c, want, alloc)
	if err != nil {
		res.addNode(nodeResult(c, "none"))
		res.fail(name, stage, err)
		return false
	}
	if !ran {
		nr := nodeResult(c, "resized")
		nr.Repairs = append(nr.Repairs, repairs...)
		if want.RootDiskBytes != oldRoot {
			nr.Warnings = append(nr.Warnings, Warning{Stage: "resize", Detail: "the node was not running: its root partition and filesystem grow at its next start, which verifies them (with readiness)"})
		}
		res.addNode(nr)
		return true
	}
	nr, stage, err := m.startOne(ctx, name, alloc, wait) // verifies the root's growth (verifyRoot)
	if nr != nil {
		nr.Action = "resized"
		nr.Repairs = append(repairs, nr.Repairs...)
		if err == nil && want.RootDiskBytes != oldRoot && (m.Probe == nil || !wait) {
			nr.Warnings = append(nr.Warnings, Warning{Stage: "resize", Detail: "the root filesystem's growth was not verified (no readiness wait); the next start with readiness verifies it"})
		}
		res.addNode(*nr)
	}
	if err != nil {
		res.fail(name, stage, err)
	}
	return true
}

// resizeStopped stops node c, grows its root overlay to want's and
// commits want as its definition with the invocation rebuilt from it
// (crash steps root-grown and resized). It returns the invocation's
// repairs, or the failed stage ("stop" or "resize") and its error.
func (m *Manager) resizeStopped(ctx context.Context, c *state.Node, want spec.Node, alloc *portAllocator) ([]string, string, error) {
	if err := m.stop(ctx, c); err != nil {
		return nil, "stop", err
	}
	if want.RootDiskBytes != c.Spec.RootDiskBytes {
		m.logf("%s: growing the root disk to %d bytes", c.Node, want.RootDiskBytes)
		if _, err := m.Disk.Grow(ctx, c.RootDisk, want.RootDiskBytes); err != nil {
			return nil, "resize", err
		}
		m.hook("root-grown", c.Node)
	}
	adopt(c, want)
	// The recorded invocation becomes the new definition's (the old one
	// is expected to differ: no repair), so that the next launch finds it
	// Barn's.
	c.Invocation.Args = nil
	repairs, err := m.rebuildInvocation(ctx, c, alloc)
	if err == nil {
		err = m.setPhase(c, c.Phase)
	}
	if err != nil {
		return nil, "resize", err
	}
	m.hook("resized", c.Node)
	return repairs, "", nil
}

// adopt makes want c's definition, keeping the seed and the hash the
// guest's ready marker carries as created.
func adopt(c *state.Node, want spec.Node) {
	c.SeedSpecHash = c.ReadyHash()
	c.Spec, c.SpecHash = want, want.SpecHash
	if c.SeedSpecHash == c.SpecHash {
		c.SeedSpecHash = ""
	}
}

// hotpluggable reports whether running node c can reach want by hot-plug
// as its recorded invocation's headroom says: only vCPUs and memory
// change, neither decreases, both stay within the headroom, and a memory
// increase is whole memory blocks (qemu.MemoryBlock). A node launched
// without headroom (before the policy, or arm64) is not.
func hotpluggable(c *state.Node, want spec.Node) bool {
	h, have := c.Invocation.Headroom, c.Spec
	if h == nil || want.RootDiskBytes != have.RootDiskBytes || want.CPUs < have.CPUs || want.MemoryBytes < have.MemoryBytes {
		return false
	}
	grow := want.MemoryBytes - have.MemoryBytes
	return want.CPUs <= h.MaxCPUs && (grow == 0 || h.MemorySlots > 0 && want.MemoryBytes <= h.MaxMemoryBytes && grow%qemu.MemoryBlock == 0)
}

// hotplugOne hot-plugs running node c up to want's vCPUs and memory and
// commits want (keeping the launched invocation, recorded as
// state.Hotplug). handled is false when QEMU cannot (hotplug_no_headroom,
// hotplug_refused): the caller stops and starts the node instead; ok is
// whether want was committed.
func (m *Manager) hotplugOne(ctx context.Context, c *state.Node, want spec.Node, res *Result) (handled, ok bool) {
	name := c.Node
	m.logf("%s: hot-plugging to %d vCPUs and %d MiB of memory", name, want.CPUs, want.MemoryBytes>>20)
	err := m.VM.Hotplug(ctx, c, want.CPUs, want.MemoryBytes, func(step string) { m.hook(step, name) })
	if e := exitcode.As(err); e != nil && (e.Reason == "hotplug_no_headroom" || e.Reason == "hotplug_refused") {
		m.logf("%s: %v; stopping and starting it instead", name, err)
		return false, false
	}
	if err != nil {
		res.addNode(nodeResult(c, "none"))
		res.fail(name, "hotplug", err)
		return true, false
	}
	launched := state.Hotplug{LaunchCPUs: c.Spec.CPUs, LaunchMemoryBytes: c.Spec.MemoryBytes}
	if c.Hotplug != nil {
		launched = *c.Hotplug
	}
	adopt(c, want)
	c.Hotplug = &launched
	if err := m.setPhase(c, c.Phase); err != nil {
		res.addNode(nodeResult(c, "none"))
		res.fail(name, "hotplug", err)
		return true, false
	}
	m.hook("resized", name)
	res.addNode(nodeResult(c, "hotplugged"))
	return true, true
}

// resizedSpec is the applied spec after resizing names: the applied
// spec with those nodes' definitions taken from the plan, so that every
// other node keeps the definition it was applied with.
func resizedSpec(p *plan.Plan, applied *state.Deployment, names []string) spec.Spec {
	out := applied.Spec
	out.Nodes = append([]spec.Node(nil), applied.Spec.Nodes...)
	take := map[string]bool{}
	for _, n := range names {
		take[n] = true
	}
	for i, n := range out.Nodes {
		if take[n.Name] {
			out.Nodes[i] = *p.Spec.Node(n.Name)
		}
	}
	out.Seal()
	return out
}

// resizeAgain plans the spec's inventory afresh, with planArgs, and
// resizes names.
func resizeAgain(source string, planArgs, names []string) string {
	return spec.PlanPipeline(source, planArgs, "barn-node resize "+strings.Join(names, " ")+" --force")
}
