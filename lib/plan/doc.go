// Package plan compares a desired resolved spec with applied evidence and
// classifies every node into exactly one of six outcomes. Planning is
// read-only and pure: the caller supplies the applied state and an image
// resolver; nothing here touches the host.
//
// The barn.plan/v1 document is the contract between barn-plan and
// barn-node apply/recreate.
//
// Image requests live in the spec, artifacts in the plan. The resolved spec
// carries selectors only: barn-inventory reads no catalog, and a node
// without vm_image carries the empty selector, meaning the active catalog's
// defaults.image on its default channel ("@VERSION" for vm_version alone).
// Compute resolves selectors to exact artifacts through the Resolver the
// caller wires in (barn-plan: the selected repository's active catalog).
// That resolution belongs here, not in barn-inventory, because of the
// design's drift rule: spec hashes cover the request, so neither a channel
// move nor a new catalog default makes a node drift by itself. Nodes kept
// (start, unchanged, resize) keep their committed artifact; only a node created or
// recreated takes what the catalog says at plan time. A lab whose
// repository's defaults.image is d12 (the demo's local repository) gets
// d12 without naming it; the official repository's default is u24.
package plan

import (
	"barn.dev/lib/imageref"
	"barn.dev/lib/spec"
)

// Schema is the schema name of the plan document.
const Schema = "barn.plan/v1"

// Outcome is a node's classification.
type Outcome string

// The six outcomes.
const (
	Create    Outcome = "create"    // desired, no committed state
	Start     Outcome = "start"     // committed, unchanged, not running
	Unchanged Outcome = "unchanged" // committed, unchanged, running
	Resize    Outcome = "resize"    // committed, only vCPUs, memory or a larger root disk changed: in place, identity kept
	Recreate  Outcome = "recreate"  // committed, definition changed
	Missing   Outcome = "missing"   // committed, absent from the desired spec (or vm_skip)
)

// Action summarises the whole plan.
type Action string

// The summary actions.
const (
	ActionCreate   Action = "create"   // no deployment yet: every node is created
	ActionConverge Action = "converge" // some nodes are created, the rest kept
	ActionStart    Action = "start"    // only stopped nodes start
	ActionNone     Action = "none"     // everything already runs as desired
	ActionRecreate Action = "recreate" // drift: `barn-node recreate` is required
	ActionResize   Action = "resize"   // resource drift only: `barn-node resize` is required
	ActionBlocked  Action = "blocked"  // committed nodes are missing from the desired spec, or a root disk is below its image's size
)

// Plan is the barn.plan/v1 document.
type Plan struct {
	Schema      string              `json:"schema"`
	Spec        spec.Spec           `json:"spec"`     // the full desired spec it was computed from
	BasedOn     BasedOn             `json:"based_on"` // the applied state it was computed against
	Action      Action              `json:"action"`
	Destructive bool                `json:"destructive"`
	Selected    []string            `json:"selected"`            // node selectors given, empty for all
	Overrides   *Overrides          `json:"overrides,omitempty"` // per-command overrides applied to the selected nodes (in Spec)
	Nodes       []NodePlan          `json:"nodes"`               // desired nodes by address, then missing ones
	Images      []imageref.Identity `json:"images"`              // exact images of the selected nodes, sorted
	Totals      Totals              `json:"totals"`
	Warnings    []Warning           `json:"warnings"`
	// Blocked explains, when non-empty, why the plan cannot be applied as
	// it stands: applying only the selected nodes cannot settle the
	// deployment (unselected peers drift, or the deployment envelope
	// changed), or a node to build asks for a root disk below its image's
	// virtual size (RootDiskTooSmall; Next is then empty).
	Blocked []string `json:"blocked"`
	// Next lists the commands that apply the required explicit
	// transitions, in the order to run them; empty when nothing is to do.
	Next []string `json:"next"`
	// Notes are facts about how the plan was read (for example a busy
	// deployment lock); they never change the outcome.
	Notes []string `json:"notes"`
}

// BasedOn identifies applied deployment state. Generation 0 and an empty
// SpecHash mean "no deployment".
type BasedOn struct {
	Generation int64  `json:"generation"`
	SpecHash   string `json:"spec_hash"`
}

// NodePlan is one node's outcome.
type NodePlan struct {
	Name     string             `json:"name"`
	Address  string             `json:"address"`
	Outcome  Outcome            `json:"outcome"`
	Reason   string             `json:"reason,omitempty"` // e.g. "deployment_recreate_required", "runtime_drift"
	Phase    string             `json:"phase,omitempty"`  // committed phase, when any
	Changes  []Change           `json:"changes"`
	Summary  []string           `json:"summary"` // human lines, e.g. "meta memory: 4 GiB -> 8 GiB"
	Image    *imageref.Identity `json:"image,omitempty"`
	Selector string             `json:"selector,omitempty"`
	// Download says whether the exact image of a node to create or
	// recreate is already in the image cache or will be pulled; nil when
	// the node keeps its image, its image is unresolved, or the cache was
	// not consulted.
	Download *Download `json:"download,omitempty"`
}

// Download is what apply will fetch for one node's image.
type Download struct {
	Cached bool  `json:"cached"` // the cache holds the exact artifact (verified again before use)
	Bytes  int64 `json:"bytes"`  // bytes to fetch: the artifact size, 0 when cached
}

// Change is one field that differs between applied and desired.
type Change struct {
	Field string `json:"field"` // e.g. "memory_bytes", "disks", "deployment.subnet"
	From  any    `json:"from"`
	To    any    `json:"to"`
}

// Totals sums the selected desired nodes.
type Totals struct {
	CPUs        int        `json:"cpus"`
	MemoryBytes int64      `json:"memory_bytes"`
	DiskBytes   int64      `json:"disk_bytes"` // root disks plus every data disk
	Disks       []DiskSize `json:"disks"`
	// DownloadImages and DownloadBytes count the distinct images apply will
	// pull (an image several nodes share is fetched once) and their bytes.
	DownloadImages int   `json:"download_images"`
	DownloadBytes  int64 `json:"download_bytes"`
}

// DiskSize is one disk counted in Totals.
type DiskSize struct {
	Node      string `json:"node"`
	Name      string `json:"name"` // "root" or the data disk name
	SizeBytes int64  `json:"size_bytes"`
}

// Warning is a non-fatal finding.
type Warning struct {
	Code    string `json:"code"`           // e.g. "non_default_subnet", "images_unresolved", "interface_names"
	Node    string `json:"node,omitempty"` // the node it concerns; empty for deployment-wide
	Message string `json:"message"`
}
