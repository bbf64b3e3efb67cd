// Package cli is barn-node's command line, importable so that tests can run
// the tool in process (testscripts registers it as a command).
package cli

import (
	"context"

	"barn.dev/lib/tool"
)

// Name is the tool's name as printed in errors.
const Name = "barn-node"

// grammar is the kong command tree: the lifecycle commands (lifecycle.go)
// and the guest access commands (access.go).
type grammar struct {
	lifecycleCommands
	accessCommands
	tool.Globals
}

// Main runs barn-node with args (without the program name) and returns the
// exit status.
func Main(ctx context.Context, args []string, stdio tool.Stdio, getenv func(string) string) int {
	return tool.Main(ctx, Name, "Act on nodes: apply a plan, start, stop, recreate, destroy, reach them.", args, stdio, getenv, &grammar{})
}
