package plan

import (
	"fmt"
	"runtime"

	"barn.dev/lib/imageref"
	"barn.dev/lib/spec"
	"barn.dev/lib/state"
)

// configWarnings are the non-fatal findings about the selected plan:
//   - non_default_subnet: the private network is not 10.10.10.0/24;
//   - interface_names: an opaque variable names a guest interface, which
//     Barn neither creates nor renames (from the spec's resolve-time
//     "interface_name" warnings, one per node they concern);
//   - image_preview, image_testing, image_deprecated: an exact image's
//     catalog status;
//   - persistent_disk_shrink: a recreate would attach a persistent disk
//     that is larger than the size now requested (Barn never shrinks);
//   - shares_unsupported_on_darwin: on a macOS host, a selected node has
//     vm_shares, which QEMU 9p cannot start there (it cannot reopen the
//     inherited directory descriptor), so that node will fail to start.
func configWarnings(p *Plan, in Input) []Warning {
	var w []Warning
	goos := in.GOOS
	if goos == "" {
		goos = runtime.GOOS
	}
	if goos == "darwin" {
		for _, np := range p.Nodes {
			if n := p.Spec.Node(np.Name); n != nil && len(n.Shares) > 0 {
				w = append(w, Warning{Code: "shares_unsupported_on_darwin", Node: n.Name,
					Message: fmt.Sprintf("%s has %d vm_shares; 9p shares cannot start on macOS hosts (QEMU cannot reopen the shared directory's descriptor), so %s will fail to start: remove its vm_shares", n.Name, len(n.Shares), n.Name)})
			}
		}
	}
	sub := p.Spec.Deployment.Subnet
	if sub.CIDR != DefaultCIDR {
		w = append(w, Warning{Code: "non_default_subnet",
			Message: fmt.Sprintf("using the non-default Barn network %s; the installed network (barn-net) and every node address must use it", sub.CIDR)})
	}
	w = append(w, interfaceWarnings(p)...)
	for _, id := range p.Images {
		switch id.Status {
		case "preview", "testing", "deprecated":
			w = append(w, Warning{Code: "image_" + id.Status,
				Message: fmt.Sprintf("image %s is %s in the catalog", IdentityLabel(id), id.Status)})
		}
	}
	w = append(w, shrinkWarnings(p, in)...)
	return w
}

// interfaceWarnings repeats, for the selected nodes, the inventory's
// warnings about interface names Barn does not create.
func interfaceWarnings(p *Plan) []Warning {
	var w []Warning
	selected := make(map[string]bool, len(p.Nodes))
	for _, np := range p.Nodes {
		selected[np.Name] = true
	}
	for _, iw := range p.Spec.Warnings {
		if iw.Code != "interface_name" {
			continue
		}
		nodes := iw.Nodes
		if len(nodes) == 0 {
			nodes = []string{""}
		}
		for _, node := range nodes {
			if node != "" && !selected[node] {
				continue
			}
			where := "every node"
			if node != "" {
				where = node
			}
			w = append(w, Warning{Code: "interface_names", Node: node,
				Message: fmt.Sprintf("%s = %s (%s): Barn does not create or rename guest interfaces; the fixed-IP NIC is matched by MAC, so check that %s exists in the guest", iw.Key, iw.Value, where, iw.Value)})
		}
	}
	return w
}

// shrinkWarnings warns, for each node being recreated, of a persistent
// disk the desired spec would shrink.
func shrinkWarnings(p *Plan, in Input) []Warning {
	var w []Warning
	for _, np := range p.Nodes {
		n := p.Spec.Node(np.Name)
		if n == nil || (np.Outcome != Create && np.Outcome != Recreate) {
			continue
		}
		c := in.Nodes[np.Name]
		if c == nil || np.Outcome != Recreate {
			continue
		}
		for _, have := range c.DataDisks {
			for _, want := range n.Disks {
				if have.Persistent && want.Persistent && have.Name == want.Name && want.SizeBytes < have.SizeBytes {
					w = append(w, Warning{Code: "persistent_disk_shrink", Node: n.Name,
						Message: fmt.Sprintf("%s persistent disk %s is %s; %s requested would shrink it and Barn never shrinks a disk: request at least %s",
							n.Name, want.Mount, FormatSize(have.SizeBytes), FormatSize(want.SizeBytes), FormatSize(have.SizeBytes))})
				}
			}
		}
	}
	return w
}

// RootDiskTooSmall is the finding that a node to be created or recreated
// asks for a root disk below its exact image's virtual size (the rule
// spec.CheckRootDiskFits), as one line naming the node, the inventory
// field, the image and its virtual size; "" when the disk fits or the
// image is not resolved yet. barn-plan blocks on it and barn-node apply
// and recreate refuse it before pulling anything.
func RootDiskTooSmall(n *spec.Node, id *imageref.Identity) string {
	if n == nil || id == nil {
		return ""
	}
	v := spec.CheckRootDiskFits(n.RootDiskBytes, id.VirtualSize)
	if v == nil {
		return ""
	}
	return fmt.Sprintf("%s: vm_disk: %s of image %s; %s", n.Name, v.Problem, IdentityLabel(*id), v.Hint)
}

// rootDiskBlockers lists RootDiskTooSmall for every selected node that
// would be created or recreated.
func rootDiskBlockers(p *Plan) []string {
	var out []string
	for _, np := range p.Nodes {
		if np.Outcome != Create && np.Outcome != Recreate {
			continue
		}
		if msg := RootDiskTooSmall(p.Spec.Node(np.Name), np.Image); msg != "" {
			out = append(out, msg)
		}
	}
	return out
}

// IdentityLabel renders an exact image as image@version/arch, e.g.
// "d12@12.13/amd64".
func IdentityLabel(id imageref.Identity) string {
	return fmt.Sprintf("%s@%s/%s", id.Image, id.Version, id.Arch)
}

// controlWarning is the warning "control_node_differs" when the applied
// deployment's control node is not the one the desired spec (the
// inventory's admin_ip) names, as after destroying the control node
// (lifecycle promotes the first remaining node). It says what to do:
// create the named node again (it becomes the control node), or point
// admin_ip at the applied control node, whose guest then needs a
// recreate to receive the control key. nil when they agree.
func controlWarning(in Input, d *spec.Spec) *Warning {
	a := in.Applied
	if a == nil || a.Spec.Control == "" || a.Spec.Control == d.Control {
		return nil
	}
	want, was := d.Node(d.Control), a.Spec.Node(a.Spec.Control)
	if want == nil || was == nil {
		return nil
	}
	msg := fmt.Sprintf("the inventory's admin_ip makes %s (%s) the control node, but the applied control node is %s (%s)", want.Name, want.Address, was.Name, was.Address)
	if c := in.Nodes[want.Name]; c == nil || c.Phase == state.Absent {
		msg += fmt.Sprintf(": %s is not built (destroyed?); applying the plan creates it as the control node again, or set admin_ip to %s to keep %s (a recreate of %s then gives its guest the control key)", want.Name, was.Address, was.Name, was.Name)
	} else {
		msg += fmt.Sprintf(": set admin_ip to %s to keep %s, or recreate both so that %s becomes the control node", was.Address, was.Name, want.Name)
	}
	return &Warning{Code: "control_node_differs", Node: want.Name, Message: msg}
}
