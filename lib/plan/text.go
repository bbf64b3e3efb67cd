package plan

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"barn.dev/lib/human"
	"barn.dev/lib/spec"
)

// outcomeMarks are the --text diff markers.
var outcomeMarks = map[Outcome]string{
	Create:    "+",
	Recreate:  "~",
	Resize:    "^",
	Missing:   "!",
	Unchanged: "=",
	Start:     ">",
}

// RenderText writes the human view of the plan (barn-plan --text): one
// header, then per node a marker line ("+ create", "~ recreate",
// "! missing", "= unchanged", "> start", "^ resize", aligned as a table column) with
// its address, and under its name the change lines, image, resources and
// data disks; then totals, what
// will be downloaded, images,
// warnings, blocked reasons, notes and the commands that apply the
// required explicit transitions.
func (p *Plan) RenderText(w io.Writer) error {
	b := bufio.NewWriter(w)
	based := "no applied deployment"
	if p.BasedOn.SpecHash != "" {
		based = fmt.Sprintf("applied generation %d, spec %s", p.BasedOn.Generation, short(p.BasedOn.SpecHash))
	}
	fmt.Fprintf(b, "plan: %s", p.Action)
	if p.Destructive {
		fmt.Fprint(b, " (destructive)")
	}
	fmt.Fprintf(b, "; desired spec %s against %s\n", short(p.Spec.SpecHash), based)
	if len(p.Selected) > 0 {
		fmt.Fprintf(b, "selected: %s\n", strings.Join(p.Selected, " "))
	}
	if p.Overrides != nil {
		fmt.Fprintf(b, "overrides (this plan only): %s\n", strings.Join(p.Overrides.Args, " "))
	}

	sharedDisks := commonDisks(p)
	if err := p.nodeTable(b, sharedDisks); err != nil {
		return err
	}
	if sharedDisks != "" {
		fmt.Fprintf(b, "data disks: %s on each node\n", sharedDisks)
	}
	fmt.Fprintf(b, "totals: %d vCPUs, %s memory, %s disk\n", p.Totals.CPUs, human.Size(p.Totals.MemoryBytes), human.Size(p.Totals.DiskBytes))
	if p.Totals.DownloadImages > 0 {
		fmt.Fprintf(b, "download: %d image(s), %s\n", p.Totals.DownloadImages, human.Size(p.Totals.DownloadBytes))
	}
	for _, id := range p.Images {
		fmt.Fprintf(b, "image: %s  %s  %s  sha256:%s\n", IdentityLabel(id), id.File, human.Size(id.SizeBytes), id.SHA256)
	}
	for _, warn := range p.Warnings {
		fmt.Fprintf(b, "warning: %s\n", warn.Message)
	}
	for _, bl := range p.Blocked {
		fmt.Fprintf(b, "blocked: %s\n", bl)
	}
	for _, note := range p.Notes {
		fmt.Fprintf(b, "note: %s\n", note)
	}
	if len(p.Next) == 0 && len(p.Blocked) == 0 {
		fmt.Fprintln(b, "nothing to do")
	}
	for _, next := range p.Next {
		fmt.Fprintf(b, "next: %s\n", next)
	}
	return b.Flush()
}

// nodeTable writes the plan's nodes to b as a table: the marked outcome is
// the first column and each node's detail lines start under its name
// (data disks per node unless sharedDisks, the disks every node has, is
// set).
func (p *Plan) nodeTable(b io.Writer, sharedDisks string) error {
	tw := human.Table(b)
	detail := func(format string, args ...any) { fmt.Fprintf(tw, "\t"+format+"\n", args...) }
	for _, np := range p.Nodes {
		fmt.Fprintf(tw, "%s %s\t%s %s", outcomeMarks[np.Outcome], np.Outcome, np.Name, np.Address)
		if np.Reason != "" {
			fmt.Fprintf(tw, " (%s)", np.Reason)
		}
		fmt.Fprintln(tw)
		if np.Outcome == Missing || np.Outcome == Recreate || np.Outcome == Resize {
			for _, l := range np.Summary {
				detail("%s", l)
			}
		}
		if np.Outcome == Missing {
			continue
		}
		n := p.Spec.Node(np.Name)
		detail("image %s%s", imageText(np), downloadText(np.Download))
		detail("%d vCPU, %s memory, %s root disk", n.CPUs, human.Size(n.MemoryBytes), human.Size(n.RootDiskBytes))
		if sharedDisks == "" {
			detail("data disks: %s", disksText(n.Disks))
		}
	}
	return tw.Flush()
}

func imageText(np NodePlan) string {
	if np.Image != nil {
		return IdentityLabel(*np.Image)
	}
	if np.Selector == "" {
		return "catalog default (unresolved)"
	}
	return np.Selector + " (unresolved)"
}

func downloadText(d *Download) string {
	switch {
	case d == nil:
		return ""
	case d.Cached:
		return " (cached)"
	}
	return " (download " + human.Size(d.Bytes) + ")"
}

func disksText(disks []spec.Disk) string {
	if len(disks) == 0 {
		return "none"
	}
	parts := make([]string, len(disks))
	for i, d := range disks {
		parts[i] = DiskLabel(d)
	}
	return strings.Join(parts, ", ")
}

// commonDisks returns the data disk text when every listed desired node
// has the same disks and there are at least two such nodes, else "".
func commonDisks(p *Plan) string {
	common, count := "", 0
	for _, np := range p.Nodes {
		if np.Outcome == Missing {
			continue
		}
		t := disksText(p.Spec.Node(np.Name).Disks)
		if count > 0 && t != common {
			return ""
		}
		common, count = t, count+1
	}
	if count < 2 {
		return ""
	}
	return common
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	if hash == "" {
		return "-"
	}
	return hash
}
