// Package cli is barn-state's command line, importable so that tests can run the
// tool in process (testscripts registers it as a command).
//
// barn-state only reads: it opens the state root with state.Inspect (which
// creates nothing), takes no waiting lock, and reports a busy deployment
// in a note instead of waiting.
package cli

import (
	"context"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/state"
	"barn.dev/lib/tool"
)

// Name is the tool's name as printed in errors.
const Name = "barn-state"

// grammar is the kong command tree.
type grammar struct {
	Path    PathCmd    `cmd:"" help:"Print the resolved state root and runtime directory."`
	Show    ShowCmd    `cmd:"" help:"Show the deployment and a summary of every node."`
	Node    NodeCmd    `cmd:"" help:"Print one node's committed state."`
	Journal JournalCmd `cmd:"" help:"Print one node's prepare journal."`
	Events  EventsCmd  `cmd:"" help:"Print the event log as JSON lines."`
	Locks   LocksCmd   `cmd:"" help:"List lock holders without waiting."`
	Verify  VerifyCmd  `cmd:"" help:"Check every document, mode, owner, hash and allowlist; exit 7 on any problem."`
	Query   QueryCmd   `cmd:"" help:"Run a jq filter over the whole state as one document."`
	tool.Globals
}

// Main runs barn-state with args (without the program name) and returns the exit
// status.
func Main(ctx context.Context, args []string, stdio tool.Stdio, getenv func(string) string) int {
	return tool.Main(ctx, Name, "Inspect the state root: deployment, nodes, journals, locks, events.", args, stdio, getenv, &grammar{})
}

// inspect opens the state root read-only.
func inspect(env *tool.Env) (*state.Root, error) {
	return state.Inspect(env.Getenv)
}

// busyNote returns the deployment lock holder's note, or "".
func busyNote(r *state.Root) string {
	h, err := r.Holder(state.LockDeploymentName)
	if err != nil || h == nil {
		return ""
	}
	return h.Note()
}

// unknownNode is the usage error for a node with no directory.
func unknownNode(r *state.Root, node string) error {
	names, err := r.NodeNames()
	if err != nil {
		return err
	}
	e := exitcode.New(exitcode.Usage, "no node %q in the state root (known: %v)", node, names).WithReason("unknown_node")
	if len(names) == 0 {
		e = exitcode.New(exitcode.Usage, "no node %q in the state root (it has no nodes)", node).WithReason("unknown_node")
	}
	return e.WithNext("barn-state show")
}
