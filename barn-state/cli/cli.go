// Package cli is barn-state's command line, importable so that tests can run the
// tool in process (testscripts registers it as a command).
package cli

import (
	"context"

	"barn.dev/lib/tool"
)

// Name is the tool's name as printed in errors.
const Name = "barn-state"

// grammar is the kong command tree.
type grammar struct {
	tool.Globals
}

// Main runs barn-state with args (without the program name) and returns the exit
// status.
func Main(ctx context.Context, args []string, stdio tool.Stdio, getenv func(string) string) int {
	return tool.Main(ctx, Name, "Inspect the state root: deployment, nodes, journals, locks, events.", args, stdio, getenv, &grammar{})
}
