package plan

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"runtime"
	"slices"
	"strings"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/imageref"
	"barn.dev/lib/spec"
	"barn.dev/lib/state"
)

// MaxNodes is the most managed nodes one deployment may have.
const MaxNodes = spec.MaxNodes

// DefaultCIDR is Barn's default private network.
const DefaultCIDR = "10.10.10.0/24"

// Reasons set on NodePlan.Reason.
const (
	ReasonEnvelope     = "deployment_recreate_required" // a deployment-envelope field changed
	ReasonDefinition   = "definition_changed"           // the node's own definition changed
	ReasonResources    = "resources_changed"            // only vCPUs, memory or a larger root disk changed: resize in place
	ReasonRuntimeDrift = "runtime_drift"                // recorded accel or guest arch differs from the current runtime
	ReasonAbsent       = "absent_from_spec"             // committed, not in the desired spec
	ReasonSkipped      = "vm_skip"                      // committed, now marked vm_skip
	ReasonInterrupted  = "interrupted_transition"       // committed phase is mid-transition; apply settles it
)

// Input is everything Compute needs. Compute does no I/O: the caller reads
// the applied state and wires liveness and image resolution in.
type Input struct {
	// Desired is the barn.spec/v1 to plan for; its hashes must be sealed.
	Desired *spec.Spec
	// Applied is the committed deployment state; nil means no deployment.
	Applied *state.Deployment
	// Nodes holds the committed node states by name; a node without a
	// state file is simply absent. The caller must fail (integrity) on a
	// damaged state file rather than leave it out.
	Nodes map[string]*state.Node
	// Running reports whether a committed node's VM is alive (a read-only
	// audit). nil means "running exactly when the committed phase is
	// running".
	Running func(*state.Node) bool
	// Resolver resolves image selectors to exact identities. nil, or a
	// resolver returning imageref.ErrNoCatalog, yields the warning
	// "images_unresolved" and plans with selectors only.
	Resolver imageref.Resolver
	// Cached reports whether the image cache holds the exact artifact id,
	// for the plan's download fields; nil leaves them out.
	Cached func(id imageref.Identity) bool
	// Selected restricts the plan to these node names; empty means all.
	Selected []string
	// Overrides change the selected nodes' desired definitions for this
	// plan (see Overrides); nil changes nothing.
	Overrides *Overrides
	// Runtime is the accelerator and host architecture selected now, for
	// runtime drift; nil means unknown (no runtime drift is reported).
	Runtime *RuntimeProfile
	// Launchable reports whether this host can launch a guest of the
	// given architecture (amd64, arm64); its error, annotated with the
	// node, fails the plan. nil launches anything (no check).
	Launchable func(arch string) error
	// GOOS is the host operating system ("" means runtime.GOOS): on
	// "darwin" nodes with vm_shares get the warning
	// "shares_unsupported_on_darwin". Tests inject it.
	GOOS string
}

// RuntimeProfile is the runtime barn-node would use now.
type RuntimeProfile struct {
	Accel string // kvm or tcg
	Arch  string // host architecture, amd64 or arm64: what "native" means
}

// Compute classifies every selected node into exactly one of the six
// outcomes and fills the summary, images, totals and warnings.
//
// Errors: usage (2) for an invalid desired spec, an unknown node selector
// (reason "unknown_node") or an unknown image selector (from the
// resolver), or images of both boot modes in one deployment (reason
// "boot_modes_mixed") or an override the spec rules refuse (reason
// "invalid_override"); whatever in.Launchable returns for a guest
// architecture this host cannot run (capability, 3, from barn-plan);
// integrity (7) when the applied deployment's spec_hash does not match its
// spec or a committed node state is inconsistent with its name. Drift
// never errors: recreate and missing are outcomes.
func Compute(in Input) (*Plan, error) {
	if err := checkDesired(in.Desired); err != nil {
		return nil, err
	}
	if err := checkApplied(in.Applied, in.Nodes); err != nil {
		return nil, err
	}
	d := in.Desired
	committed := committedNodes(in.Nodes)
	sel, err := selection(in.Selected, knownNodes(d, committed))
	if err != nil {
		return nil, err
	}
	if d, err = overridden(d, sel, in.Overrides); err != nil {
		return nil, err
	}
	in.Desired = d
	p := newPlan(in)
	var envChanges []Change
	var envLines []string
	if in.Applied != nil {
		envChanges, envLines = envelopeChanges(in.Applied.Spec.Deployment, d.Deployment)
	}
	// Classify every node, selected or not: the launch checks see the
	// whole deployment.
	all := classifyAll(in, committed, envChanges, envLines)
	for _, np := range all {
		if sel == nil || sel[np.Name] {
			p.Nodes = append(p.Nodes, np)
		}
	}
	p.Nodes = nonNil(p.Nodes)
	if err := resolveImages(p, in); err != nil {
		return nil, err
	}
	if err := checkLaunch(p, all, sel, in); err != nil {
		return nil, err
	}
	p.Totals = totals(p)
	downloads(p, in.Cached)
	p.Action, p.Destructive = summarize(p.Nodes, in.Applied == nil && len(committed) == 0, len(envChanges) > 0)
	p.Blocked = blocked(sel, len(envChanges) > 0)
	p.Next = nextCommands(p.Nodes, d.Source.Inventory(), p.PlanArgs())
	if disks := rootDiskBlockers(p); len(disks) > 0 {
		// No command can build these nodes: the inventory must change.
		p.Action, p.Blocked, p.Next = ActionBlocked, append(p.Blocked, disks...), []string{}
	}
	p.Warnings = append(p.Warnings, configWarnings(p, in)...)
	if w := controlWarning(in, d); w != nil {
		p.Warnings = append(p.Warnings, *w)
	}
	sortWarnings(p.Warnings)
	return p, nil
}

// knownNodes are the names a selection may use: the desired nodes and the
// committed ones the desired spec omits, sorted.
func knownNodes(d *spec.Spec, committed map[string]*state.Node) []string {
	known := d.NodeNames()
	for name := range committed {
		if d.Node(name) == nil {
			known = append(known, name)
		}
	}
	slices.Sort(known)
	return known
}

// newPlan is the empty plan of in (its desired spec already overridden).
func newPlan(in Input) *Plan {
	p := &Plan{
		Schema:    Schema,
		Spec:      *in.Desired,
		Selected:  nonNil(slices.Clone(in.Selected)),
		Overrides: overridesOrNil(in.Overrides),
		Images:    []imageref.Identity{},
		Totals:    Totals{Disks: []DiskSize{}},
		Warnings:  []Warning{},
		Blocked:   []string{},
		Next:      []string{},
		Notes:     []string{},
	}
	if in.Applied != nil {
		p.BasedOn = BasedOn{Generation: in.Applied.Generation, SpecHash: in.Applied.SpecHash}
	}
	return p
}

// classifyAll classifies every desired node (by address), then every
// committed node the desired spec omits (missing, by address).
func classifyAll(in Input, committed map[string]*state.Node, envChanges []Change, envLines []string) []NodePlan {
	d := in.Desired
	running := in.Running
	if running == nil {
		running = func(n *state.Node) bool { return n.Phase == state.Running }
	}
	all := make([]NodePlan, 0, len(d.Nodes)+len(committed))
	for _, want := range d.Nodes {
		all = append(all, classify(want, committed[want.Name], in, envChanges, envLines, running))
	}
	sortByAddress(all)
	skipped := make(map[string]bool, len(d.Skipped))
	for _, s := range d.Skipped {
		skipped[s.Name] = true
	}
	var missing []NodePlan
	for name, c := range committed {
		if d.Node(name) != nil {
			continue
		}
		np := NodePlan{Name: name, Address: c.Spec.Address, Outcome: Missing, Reason: ReasonAbsent,
			Phase: string(c.Phase), Changes: []Change{}, Image: identityPtr(c.Image)}
		np.Summary = []string{name + " is committed but absent from the desired spec; restore its definition or destroy it explicitly"}
		if skipped[name] {
			np.Reason = ReasonSkipped
			np.Summary = []string{name + " is committed but now marked vm_skip; unmark it or destroy it explicitly"}
		}
		missing = append(missing, np)
	}
	sortByAddress(missing)
	return append(all, missing...)
}

// committedNodes drops nil entries and nodes whose committed phase is
// absent: they hold no VM definition.
func committedNodes(nodes map[string]*state.Node) map[string]*state.Node {
	out := make(map[string]*state.Node, len(nodes))
	for name, n := range nodes {
		if n != nil && n.Phase != state.Absent {
			out[name] = n
		}
	}
	return out
}

// classify decides one desired node's outcome against its committed state c
// (nil when none).
func classify(want spec.Node, c *state.Node, in Input, envChanges []Change, envLines []string, running func(*state.Node) bool) NodePlan {
	// A node without its own image asks for the deployment's default
	// (itself "" for the active catalog's default).
	np := NodePlan{Name: want.Name, Address: want.Address, Changes: []Change{}, Summary: []string{}, Selector: cmp.Or(want.Image, in.Desired.Deployment.Image)}
	if c == nil {
		np.Outcome = Create
		np.Summary = append(np.Summary, want.Name+" will be created")
		return np
	}
	np.Phase = string(c.Phase)
	changes, lines := nodeChanges(c.Spec, want)
	switch {
	case len(envChanges) > 0:
		np.Outcome, np.Reason = Recreate, ReasonEnvelope
		np.Changes = append(append(np.Changes, envChanges...), changes...)
		for _, l := range envLines {
			np.Summary = append(np.Summary, want.Name+" "+l)
		}
		np.Summary = append(np.Summary, lines...)
	case builtUnderOtherEnvelope(in.Desired.Deployment, want, c):
		// The node was built under another envelope than the desired one
		// (no deployment state to compare with, or an interrupted
		// whole-deployment recreate).
		np.Outcome, np.Reason = Recreate, ReasonEnvelope
		np.Changes = append(np.Changes, Change{Field: "deployment", From: c.SpecHash, To: spec.NodeHash(in.Desired.Deployment, c.Spec)})
		np.Changes = append(np.Changes, changes...)
		np.Summary = append(np.Summary, want.Name+" was built under other deployment settings")
		np.Summary = append(np.Summary, lines...)
	case len(changes) > 0:
		np.Outcome, np.Reason = Recreate, ReasonDefinition
		np.Changes, np.Summary = changes, lines
		if !Resizable(changes) {
			break
		}
		// A resize keeps the node's root disk and identity, so a node
		// that must move to another accelerator or architecture is
		// recreated all the same.
		if drift, dl := runtimeDrift(c, in); len(drift) > 0 {
			np.Changes, np.Summary = append(changes, drift...), append(lines, dl...)
			break
		}
		np.Outcome, np.Reason = Resize, ReasonResources
	default:
		if drift, dl := runtimeDrift(c, in); len(drift) > 0 {
			np.Outcome, np.Reason = Recreate, ReasonRuntimeDrift
			np.Changes, np.Summary = drift, dl
			break
		}
		if running(c) {
			np.Outcome = Unchanged
			np.Summary = append(np.Summary, want.Name+" runs as desired")
		} else {
			np.Outcome = Start
			np.Summary = append(np.Summary, want.Name+" is "+string(c.Phase)+" and will be started")
		}
		switch c.Phase {
		case state.Preparing, state.Starting, state.Stopping, state.Destroying:
			np.Reason = ReasonInterrupted
		}
	}
	if np.Outcome == Start || np.Outcome == Unchanged || np.Outcome == Resize {
		np.Image = identityPtr(c.Image) // existing nodes keep their base image
	}
	return np
}

// Resizable reports whether changes (of one node, non-empty) can all be
// applied in place by `barn-node resize`: vCPUs, memory and a larger
// root disk. Everything else, a smaller root disk included (only a new
// root disk can shrink), is recreate.
func Resizable(changes []Change) bool {
	for _, c := range changes {
		switch c.Field {
		case "cpus", "memory_bytes":
		case "root_disk_bytes":
			from, okF := c.From.(int64)
			to, okT := c.To.(int64)
			if !okF || !okT || to <= from {
				return false
			}
		default:
			return false
		}
	}
	return len(changes) > 0
}

// builtUnderOtherEnvelope reports whether committed node c was built under
// a deployment envelope other than env: its stored node hash differs from
// the hash of its stored definition under env. When the stored definition
// equals the desired node, that hash is the desired node's (already
// verified) hash and need not be recomputed.
func builtUnderOtherEnvelope(env spec.Deployment, want spec.Node, c *state.Node) bool {
	stored := c.Spec
	stored.SpecHash = want.SpecHash
	if reflect.DeepEqual(stored, want) {
		return c.SpecHash != want.SpecHash
	}
	return spec.NodeHash(env, c.Spec) != c.SpecHash
}

// runtimeDrift compares the committed accelerator and guest architecture
// with the runtime selected now.
func runtimeDrift(c *state.Node, in Input) ([]Change, []string) {
	if in.Runtime == nil {
		return nil, nil
	}
	var ch []Change
	var lines []string
	accel := in.Runtime.Accel
	if c.Image.Arch != "" && in.Runtime.Arch != "" && c.Image.Arch != in.Runtime.Arch {
		// A foreign guest runs under TCG by policy, whatever the
		// host's own accelerator is (lib/qemu ForeignProfile).
		accel = "tcg"
	}
	if c.Accel != "" && accel != "" && c.Accel != accel {
		ch = append(ch, Change{Field: "runtime.accel", From: c.Accel, To: accel})
		lines = append(lines, fmt.Sprintf("%s accelerator: %s -> %s", c.Node, c.Accel, accel))
	}
	if arch := guestArch(in); c.Image.Arch != "" && arch != "" && c.Image.Arch != arch {
		ch = append(ch, Change{Field: "runtime.arch", From: c.Image.Arch, To: arch})
		lines = append(lines, fmt.Sprintf("%s guest architecture: %s -> %s", c.Node, c.Image.Arch, arch))
	}
	return ch, lines
}

// guestArch is the desired guest architecture: the deployment arch, with
// native meaning the runtime's host architecture (or this binary's when
// the runtime is unknown).
func guestArch(in Input) string {
	a := in.Desired.Deployment.Arch
	if a != "" && a != "native" {
		return a
	}
	if in.Runtime != nil && in.Runtime.Arch != "" {
		return in.Runtime.Arch
	}
	return runtime.GOARCH
}

// summarize derives the summary action and destructiveness from the
// selected node outcomes, checked in order: no deployment at all → create;
// envelope change → recreate; any missing → blocked; any recreate →
// recreate; any resize → resize; any create → converge; any start →
// start; else none. Destructive is true when any selected node must be
// recreated (a resize keeps every disk and the node's identity).
func summarize(nodes []NodePlan, fresh, envelope bool) (Action, bool) {
	count := map[Outcome]int{}
	for _, n := range nodes {
		count[n.Outcome]++
	}
	destructive := count[Recreate] > 0
	switch {
	case fresh:
		return ActionCreate, false
	case envelope && destructive:
		return ActionRecreate, true
	case count[Missing] > 0:
		return ActionBlocked, destructive
	case count[Recreate] > 0:
		return ActionRecreate, true
	case count[Resize] > 0:
		return ActionResize, false
	case count[Create] > 0:
		return ActionConverge, false
	case count[Start] > 0:
		return ActionStart, false
	default:
		return ActionNone, false
	}
}

// blocked explains why a selected plan cannot be applied: the envelope
// changed (every node must be recreated together). Unselected peers that
// drift or are omitted do not block: they keep their applied definitions
// (the outcome they show is for a later command). Empty without
// selectors.
func blocked(sel map[string]bool, envelope bool) []string {
	out := []string{}
	if sel != nil && envelope {
		out = append(out, "deployment-level settings changed: every node must be recreated; plan without node selectors")
	}
	return out
}

// nextCommands lists the explicit transitions the plan requires, each a
// command line that works as printed: those that need a plan on stdin
// plan source's inventory afresh (spec.Pipeline).
func nextCommands(nodes []NodePlan, source string, args []string) []string {
	var missing, recreate, resize []string
	apply := false
	for _, n := range nodes {
		switch n.Outcome {
		case Missing:
			missing = append(missing, n.Name)
		case Recreate:
			recreate = append(recreate, n.Name)
		case Resize:
			resize = append(resize, n.Name)
		case Create, Start:
			apply = true
		}
	}
	out := []string{}
	if len(missing) > 0 {
		out = append(out, "barn-node destroy "+strings.Join(missing, " ")+" --force")
	}
	if len(recreate) > 0 {
		out = append(out, spec.PlanPipeline(source, args, "barn-node recreate "+strings.Join(recreate, " ")+" --force"))
	}
	if len(resize) > 0 {
		out = append(out, spec.PlanPipeline(source, args, "barn-node resize "+strings.Join(resize, " ")+" --force"))
	}
	if apply {
		out = append(out, spec.PlanPipeline(source, args, "barn-node apply"))
	}
	return out
}

// totals sums the selected desired nodes (every outcome but missing).
func totals(p *Plan) Totals {
	t := Totals{Disks: []DiskSize{}}
	for _, np := range p.Nodes {
		if np.Outcome == Missing {
			continue
		}
		n := p.Spec.Node(np.Name)
		t.CPUs += n.CPUs
		t.MemoryBytes += n.MemoryBytes
		t.DiskBytes += n.RootDiskBytes
		t.Disks = append(t.Disks, DiskSize{Node: n.Name, Name: "root", SizeBytes: n.RootDiskBytes})
		for _, dk := range n.Disks {
			t.DiskBytes += dk.SizeBytes
			t.Disks = append(t.Disks, DiskSize{Node: n.Name, Name: dk.Name, SizeBytes: dk.SizeBytes})
		}
	}
	return t
}

// resolveImages fills each selected node's exact image: committed nodes
// that are kept use their stored identity; nodes to create or recreate
// resolve their selector through the catalog.
func resolveImages(p *Plan, in Input) error {
	arch := guestArch(in)
	cache := map[string]imageref.Identity{}
	unresolved := []string{}
	noCatalog := in.Resolver == nil
	for i := range p.Nodes {
		np := &p.Nodes[i]
		if np.Outcome == Create || np.Outcome == Recreate {
			if noCatalog {
				unresolved = append(unresolved, np.Name)
				continue
			}
			id, ok := cache[np.Selector]
			if !ok {
				var err error
				id, err = in.Resolver.Resolve(np.Selector, arch)
				if errors.Is(err, imageref.ErrNoCatalog) {
					noCatalog = true
					unresolved = append(unresolved, np.Name)
					continue
				}
				if err != nil {
					return annotate(err, "node %s: resolving image %q for %s", np.Name, np.Selector, arch)
				}
				cache[np.Selector] = id
			}
			np.Image = &id
		}
	}
	if len(unresolved) > 0 {
		p.Warnings = append(p.Warnings, Warning{Code: "images_unresolved",
			Message: "no image catalog is active, so these nodes have no exact image and apply refuses to build them: run barn-repo update, then plan again (" + strings.Join(unresolved, ", ") + ")"})
	}
	seen := map[imageref.Identity]bool{}
	for _, np := range p.Nodes {
		if np.Image != nil && np.Outcome != Missing && !seen[*np.Image] {
			seen[*np.Image] = true
			p.Images = append(p.Images, *np.Image)
		}
	}
	slices.SortFunc(p.Images, func(a, b imageref.Identity) int {
		return cmp.Or(cmp.Compare(a.Image, b.Image), cmp.Compare(a.Version, b.Version),
			cmp.Compare(a.Arch, b.Arch), cmp.Compare(a.SHA256, b.SHA256), cmp.Compare(a.Selector, b.Selector))
	})
	return nil
}

// downloads fills each created or recreated node's Download and the
// download totals, counting an image several nodes share once.
func downloads(p *Plan, cached func(imageref.Identity) bool) {
	if cached == nil {
		return
	}
	seen := map[imageref.Identity]bool{}
	for i := range p.Nodes {
		np := &p.Nodes[i]
		if np.Image == nil || (np.Outcome != Create && np.Outcome != Recreate) {
			continue
		}
		d := &Download{Cached: cached(*np.Image)}
		if !d.Cached {
			d.Bytes = np.Image.SizeBytes
			id := *np.Image
			id.Selector = ""
			if !seen[id] {
				seen[id] = true
				p.Totals.DownloadImages++
				p.Totals.DownloadBytes += d.Bytes
			}
		}
		np.Download = d
	}
}

// annotate prefixes an error's message with context, keeping its class.
func annotate(err error, format string, args ...any) error {
	e := exitcode.As(err)
	c := *e
	c.Message = fmt.Sprintf(format, args...) + ": " + e.Message
	if c.Err == nil {
		c.Err = err
	}
	return &c
}

func identityPtr(id imageref.Identity) *imageref.Identity {
	if id == (imageref.Identity{}) {
		return nil
	}
	return &id
}

func sortByAddress(nodes []NodePlan) {
	slices.SortFunc(nodes, func(a, b NodePlan) int {
		x, errX := netip.ParseAddr(a.Address)
		y, errY := netip.ParseAddr(b.Address)
		if errX == nil && errY == nil {
			if c := x.Compare(y); c != 0 {
				return c
			}
		}
		return cmp.Or(cmp.Compare(a.Address, b.Address), cmp.Compare(a.Name, b.Name))
	})
}

func sortWarnings(w []Warning) {
	slices.SortStableFunc(w, func(a, b Warning) int {
		return cmp.Or(cmp.Compare(a.Code, b.Code), cmp.Compare(a.Node, b.Node), cmp.Compare(a.Message, b.Message))
	})
}
