package cli

import (
	"barn.dev/lib/exitcode"
	"barn.dev/lib/tool"
)

// NodeCmd prints a node's committed state document.
type NodeCmd struct {
	Name string `arg:"" predictor:"node" help:"Node name."`
}

// Run prints nodes/<name>/state.json as it is stored (barn.state.node/v1).
func (c *NodeCmd) Run(env *tool.Env) error {
	r, err := inspect(env)
	if err != nil {
		return err
	}
	n, err := r.ReadNode(c.Name)
	if err != nil {
		return err
	}
	if n == nil {
		j, jerr := r.ReadJournal(c.Name)
		if jerr != nil {
			return jerr
		}
		if j != nil {
			return exitcode.New(exitcode.Usage, "node %q has no committed state; only a prepare journal", c.Name).
				WithReason("not_committed").WithNext("barn-state journal " + c.Name)
		}
		return unknownNode(r, c.Name)
	}
	return env.Emit(n)
}

// JournalCmd prints a node's prepare journal.
type JournalCmd struct {
	Name string `arg:"" predictor:"node" help:"Node name."`
}

// Run prints nodes/<name>/prepare.json (barn.state.journal/v1).
func (c *JournalCmd) Run(env *tool.Env) error {
	r, err := inspect(env)
	if err != nil {
		return err
	}
	j, err := r.ReadJournal(c.Name)
	if err != nil {
		return err
	}
	if j == nil {
		names, err := r.NodeNames()
		if err != nil {
			return err
		}
		for _, n := range names {
			if n == c.Name {
				return exitcode.New(exitcode.Usage, "node %q has no prepare journal (nothing is being prepared)", c.Name).
					WithReason("no_journal").WithNext("barn-state node " + c.Name)
			}
		}
		return unknownNode(r, c.Name)
	}
	return env.Emit(j)
}
