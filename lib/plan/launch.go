package plan

import (
	"fmt"
	"slices"
	"strings"

	"barn.dev/lib/exitcode"
)

// checkLaunch refuses a plan the deployment could not carry out as a
// whole, before anything is downloaded:
//
//   - boot modes mixed: every node of a deployment boots the same way, as
//     Barn 0.9 requires; a deployment whose images would be both bios and
//     uefi is a usage error (reason "boot_modes_mixed"). The nodes counted
//     are the selected ones with an exact image and the unselected ones
//     that keep their committed image.
//   - an architecture this host cannot run: in.Launchable (nil: no check)
//     is asked for every node the plan would launch (create, recreate,
//     start) with the architecture it would launch it as; its error is
//     returned annotated with the node.
func checkLaunch(p *Plan, all []NodePlan, sel map[string]bool, in Input) error {
	nodes := slices.Clone(p.Nodes)
	for _, np := range all {
		if sel != nil && !sel[np.Name] && (np.Outcome == Start || np.Outcome == Unchanged) {
			nodes = append(nodes, np)
		}
	}
	if err := CheckBootModes(nodes); err != nil {
		return err
	}
	if in.Launchable == nil {
		return nil
	}
	for _, np := range p.Nodes {
		if np.Outcome != Create && np.Outcome != Recreate && np.Outcome != Start {
			continue
		}
		arch := guestArch(in)
		if np.Image != nil && np.Image.Arch != "" {
			arch = np.Image.Arch
		}
		if err := in.Launchable(arch); err != nil {
			return annotate(err, "node %s", np.Name)
		}
	}
	return nil
}

// CheckBootModes refuses nodes whose exact images (missing nodes aside)
// boot both bios and uefi: usage (2), reason "boot_modes_mixed", naming
// the nodes of each mode. barn-plan checks every plan; barn-node apply
// checks the plan it is given again.
func CheckBootModes(nodes []NodePlan) error {
	byBoot := map[string][]string{}
	for _, np := range nodes {
		if np.Image != nil && np.Image.Boot != "" && np.Outcome != Missing {
			byBoot[np.Image.Boot] = append(byBoot[np.Image.Boot], np.Name)
		}
	}
	if len(byBoot) > 1 {
		modes := make([]string, 0, len(byBoot))
		for m := range byBoot {
			modes = append(modes, m)
		}
		slices.Sort(modes)
		parts := make([]string, len(modes))
		for i, m := range modes {
			slices.Sort(byBoot[m])
			parts[i] = fmt.Sprintf("%s (%s)", m, strings.Join(byBoot[m], ", "))
		}
		return exitcode.New(exitcode.Usage, "a deployment boots one way, but its images would boot %s", strings.Join(parts, " and ")).
			WithReason("boot_modes_mixed").
			WithNext("give every host images of one boot mode (one vm_image in all.vars), then barn-inventory resolve | barn-plan")
	}
	return nil
}
