package plan

import (
	"fmt"
	"slices"
	"strings"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/spec"
)

// Overrides are per-command changes to the desired definitions of the
// selected nodes (every node without a selection): barn-plan's --image,
// --arch, --cpu, --mem and --disk, with BARN_IMAGE, BARN_ARCH, BARN_CPU,
// BARN_MEM and BARN_DISK as defaults. They belong to the plan, the stage
// that turns the inventory's desired state into what one command will
// apply: the resolved spec stays the inventory's word (and the Ansible
// export's), while the plan's spec, which barn-node records as applied,
// carries the override. A later plan without it therefore shows the
// applied value as drift. Zero fields change nothing.
type Overrides struct {
	Image         string `json:"image,omitempty"`           // image selector, canonical (d12:stable)
	Arch          string `json:"arch,omitempty"`            // the deployment's guest architecture: amd64, arm64 or native
	CPUs          int    `json:"cpus,omitempty"`            // vCPUs
	MemoryBytes   int64  `json:"memory_bytes,omitempty"`    // guest memory in bytes
	RootDiskBytes int64  `json:"root_disk_bytes,omitempty"` // root disk in bytes
	// Args are barn-plan's flags that give these values ("--mem=1GiB"),
	// so the plan's next: hints repeat them as the user wrote them.
	Args []string `json:"args,omitempty"`
}

// IsZero reports whether o changes nothing.
func (o *Overrides) IsZero() bool {
	return o == nil || (o.Image == "" && o.Arch == "" && o.CPUs == 0 && o.MemoryBytes == 0 && o.RootDiskBytes == 0)
}

// overridden is d with o applied to the nodes sel names (every node when
// sel is nil), validated and sealed again; d itself is not changed. The
// architecture is the deployment's (one for all nodes, as every node of a
// deployment shares one guest architecture), so with a selection it
// changes deployment-wide settings, which only a command on the whole
// deployment applies. A value the spec refuses is usage (2), reason
// invalid_override, naming the flag's value and the rule.
func overridden(d *spec.Spec, sel map[string]bool, o *Overrides) (*spec.Spec, error) {
	if o.IsZero() {
		return d, nil
	}
	out := *d
	out.Nodes = make([]spec.Node, len(d.Nodes))
	copy(out.Nodes, d.Nodes)
	if o.Arch != "" {
		out.Deployment.Arch = spec.CanonicalArch(o.Arch)
	}
	for i := range out.Nodes {
		n := &out.Nodes[i]
		if sel != nil && !sel[n.Name] {
			continue
		}
		if o.Image != "" {
			n.Image = o.Image
		}
		if o.CPUs != 0 {
			n.CPUs = o.CPUs
		}
		if o.MemoryBytes != 0 {
			n.MemoryBytes = o.MemoryBytes
		}
		if o.RootDiskBytes != 0 {
			n.RootDiskBytes = o.RootDiskBytes
		}
	}
	if err := out.Validate(); err != nil {
		return nil, exitcode.New(exitcode.Usage, "override %s: %v; %s", strings.Join(o.Args, " "), err, err.Hint).
			WithReason("invalid_override").WithDetail(fmt.Sprint(err))
	}
	out.Seal()
	return &out, nil
}

// PlanArgs are barn-plan's arguments that reproduce p: its overrides as
// given, then its node selectors (for spec.PlanPipeline hints).
func (p *Plan) PlanArgs() []string {
	return append(p.OverrideArgs(), p.Selected...)
}

// OverrideArgs are p's overrides as given to barn-plan, without its node
// selectors: the arguments of a plan of every node with the same
// overrides.
func (p *Plan) OverrideArgs() []string {
	if p.Overrides == nil {
		return []string{}
	}
	return slices.Clone(p.Overrides.Args)
}

func overridesOrNil(o *Overrides) *Overrides {
	if o.IsZero() {
		return nil
	}
	return o
}
