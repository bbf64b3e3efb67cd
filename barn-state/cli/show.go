package cli

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"barn.dev/lib/state"
	"barn.dev/lib/tool"
)

// ShowCmd summarises the deployment and its nodes.
type ShowCmd struct{}

// ShowDoc is barn.state.show/v1.
type ShowDoc struct {
	Schema     string             `json:"schema"`
	Root       string             `json:"root"`
	Deployment *DeploymentSummary `json:"deployment"` // null when nothing is applied
	Nodes      []NodeSummary      `json:"nodes"`
	Note       string             `json:"note,omitempty"`
}

// DeploymentSummary is the applied deployment at a glance.
type DeploymentSummary struct {
	Generation int64     `json:"generation"`
	SpecHash   string    `json:"spec_hash"`
	Nodes      []string  `json:"nodes"` // node names in the applied spec
	Subnet     string    `json:"subnet"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// NodeSummary is one node directory at a glance.
type NodeSummary struct {
	Name        string      `json:"name"`
	Committed   bool        `json:"committed"` // has state.json
	Phase       state.Phase `json:"phase"`     // "absent" without state.json
	VMUUID      string      `json:"vm_uuid,omitempty"`
	Generation  int64       `json:"generation,omitempty"`
	SpecHash    string      `json:"spec_hash,omitempty"`
	SSHPort     int         `json:"ssh_port,omitempty"`
	InSpec      bool        `json:"in_spec"`     // named by the applied spec
	Journal     bool        `json:"journal"`     // a prepare journal is present
	Transaction string      `json:"transaction"` // "from->to" of an in-flight transaction, or ""
}

// RenderText implements tool.TextRenderer.
func (d ShowDoc) RenderText(w io.Writer) error {
	fmt.Fprintf(w, "state root: %s\n", d.Root)
	if d.Note != "" {
		fmt.Fprintf(w, "note: %s\n", d.Note)
	}
	if d.Deployment == nil {
		fmt.Fprintln(w, "deployment: none applied")
	} else {
		fmt.Fprintf(w, "deployment: generation %d, %d nodes, subnet %s, spec %s, updated %s\n",
			d.Deployment.Generation, len(d.Deployment.Nodes), d.Deployment.Subnet,
			short(d.Deployment.SpecHash), d.Deployment.UpdatedAt.Format(time.RFC3339))
	}
	if len(d.Nodes) == 0 {
		_, err := fmt.Fprintln(w, "nodes: none")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPHASE\tGEN\tSSH\tSPEC\tJOURNAL\tTRANSACTION")
	for _, n := range d.Nodes {
		ssh := "-"
		if n.SSHPort > 0 {
			ssh = fmt.Sprint(n.SSHPort)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", n.Name, n.Phase, n.Generation, ssh,
			yesNo(n.InSpec, "in spec", "not in spec"), yesNo(n.Journal, "yes", "-"), dash(n.Transaction))
	}
	return tw.Flush()
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func yesNo(b bool, y, n string) string {
	if b {
		return y
	}
	return n
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Run prints the summary. A damaged document is an integrity error (7)
// naming it, never "no deployment".
func (c *ShowCmd) Run(env *tool.Env) error {
	r, err := inspect(env)
	if err != nil {
		return err
	}
	doc, err := summarise(r)
	if err != nil {
		return err
	}
	return env.Emit(doc)
}

func summarise(r *state.Root) (ShowDoc, error) {
	doc := ShowDoc{Schema: "barn.state.show/v1", Root: r.Dir, Nodes: []NodeSummary{}, Note: busyNote(r)}
	d, err := r.ReadDeployment()
	if err != nil {
		return doc, err
	}
	inSpec := map[string]bool{}
	if d != nil {
		s := &DeploymentSummary{Generation: d.Generation, SpecHash: d.SpecHash, Nodes: d.Spec.NodeNames(),
			Subnet: d.Spec.Deployment.Subnet.CIDR, UpdatedAt: d.UpdatedAt}
		for _, n := range s.Nodes {
			inSpec[n] = true
		}
		doc.Deployment = s
	}
	names, err := r.NodeNames()
	if err != nil {
		return doc, err
	}
	for _, name := range names {
		ns := NodeSummary{Name: name, Phase: state.Absent, InSpec: inSpec[name]}
		docs, err := r.ReadNodeDocuments(name)
		if err != nil {
			return doc, err
		}
		if n := docs.State; n != nil {
			ns.Committed, ns.Phase, ns.VMUUID, ns.Generation, ns.SpecHash, ns.SSHPort =
				true, n.Phase, n.VMUUID, n.Generation, n.SpecHash, n.SSHPort
		}
		ns.Journal = docs.Journal != nil
		if t := docs.Transaction; t != nil {
			ns.Transaction = string(t.From) + "->" + string(t.To)
		}
		doc.Nodes = append(doc.Nodes, ns)
	}
	return doc, nil
}
