package cli

import (
	"io"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/hostnet"
	"barn.dev/lib/quote"
	"barn.dev/lib/spec"
	"barn.dev/lib/state"
	"barn.dev/lib/tool"
)

type hostsCmd struct{}

// HostsDoc is barn.hosts/v1: every applied node's private address and the
// names it answers to (hostNames: node name, then aliases), in the applied
// spec's node order, for
// `barn-node hosts | sudo barn-net hosts install`.
type HostsDoc struct {
	Schema  string              `json:"schema"`
	Entries []hostnet.HostEntry `json:"entries"`
}

// RenderText prints the lines the hosts file would get.
func (d HostsDoc) RenderText(w io.Writer) error {
	for _, e := range d.Entries {
		l, err := quote.HostsLine(e.Address, e.Names)
		if err != nil {
			return err
		}
		if _, err := io.WriteString(w, l+"\n"); err != nil {
			return err
		}
	}
	return nil
}

func (c *hostsCmd) Run(env *tool.Env) error {
	root, err := state.Inspect(env.Getenv)
	if err != nil {
		return err
	}
	d, err := root.ReadDeployment()
	if err != nil {
		return err
	}
	if d == nil {
		return exitcode.New(exitcode.Conflict, "no deployment under %s: no names to publish", root.Dir).
			WithReason("no_deployment").WithNext("barn-inventory resolve | barn-plan | barn-node apply")
	}
	doc := HostsDoc{Schema: "barn.hosts/v1", Entries: []hostnet.HostEntry{}}
	for _, n := range d.Spec.Nodes {
		doc.Entries = append(doc.Entries, hostnet.HostEntry{Address: n.Address, Names: hostNames(n)})
	}
	return env.Emit(doc)
}

// hostNames are the names a node answers to in the hosts file, in the
// order hosts(5) reads them: the canonical name first (its FQDN when its
// nodename is fully qualified, else its name), then its name and its
// aliases — the same names, in the same order, as every guest's own
// hosts block.
func hostNames(n spec.Node) []string {
	names := []string{n.Name}
	if n.FQDN != "" {
		names = []string{n.FQDN, n.Name} // the canonical name first, as in the guests
	}
	return append(names, n.Aliases...)
}
