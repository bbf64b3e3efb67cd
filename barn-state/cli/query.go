package cli

import (
	"github.com/itchyny/gojq"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/state"
	"barn.dev/lib/tool"
)

// QueryCmd runs a jq filter over the whole state.
type QueryCmd struct {
	Expr string `arg:"" help:"A jq filter (gojq), e.g. '.nodes[\"pg-meta-1\"].state.phase'."`
}

// DumpDoc is barn.state.dump/v1: the whole state as one document, the input
// of query.
type DumpDoc struct {
	Schema     string              `json:"schema"`
	Root       string              `json:"root"`
	RuntimeDir string              `json:"runtime_dir"`
	Deployment *state.Deployment   `json:"deployment"`
	Nodes      map[string]NodeDump `json:"nodes"`
	Locks      []LockInfo          `json:"locks"`
	Note       string              `json:"note,omitempty"`
}

// NodeDump is everything stored for one node directory.
type NodeDump struct {
	State       *state.Node        `json:"state"`
	Journal     *state.Journal     `json:"journal"`
	Transaction *state.Transaction `json:"transaction"`
}

// Run evaluates Expr over the dump. Strings print raw; other values as
// JSON (or YAML with --yaml).
func (c *QueryCmd) Run(env *tool.Env) error {
	if env.Output.JQ != "" {
		return exitcode.New(exitcode.Usage, "query takes its filter as an argument; drop --jq")
	}
	if _, err := gojq.Parse(c.Expr); err != nil {
		return exitcode.New(exitcode.Usage, "query %q: %v", c.Expr, err).WithReason("bad_query")
	}
	r, err := inspect(env)
	if err != nil {
		return err
	}
	doc, err := dump(r)
	if err != nil {
		return err
	}
	env.Output.JQ = c.Expr
	env.Output.Text = false
	return env.Emit(doc)
}

func dump(r *state.Root) (DumpDoc, error) {
	doc := DumpDoc{Schema: "barn.state.dump/v1", Root: r.Dir, RuntimeDir: r.RuntimeDir, Nodes: map[string]NodeDump{}, Note: busyNote(r)}
	d, err := r.ReadDeployment()
	if err != nil {
		return doc, err
	}
	doc.Deployment = d
	names, err := r.NodeNames()
	if err != nil {
		return doc, err
	}
	for _, n := range names {
		docs, err := r.ReadNodeDocuments(n)
		if err != nil {
			return doc, err
		}
		doc.Nodes[n] = NodeDump{State: docs.State, Journal: docs.Journal, Transaction: docs.Transaction}
	}
	locks, err := listLocks(r)
	if err != nil {
		return doc, err
	}
	doc.Locks = locks.Locks
	return doc, nil
}
