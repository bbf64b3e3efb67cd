// Package cli is barn-net's command line, importable so that tests can run the
// tool in process (testscripts registers it as a command).
package cli

import (
	"context"

	"barn.dev/lib/tool"
)

// Name is the tool's name as printed in errors.
const Name = "barn-net"

// grammar is the kong command tree.
type grammar struct {
	tool.Globals
}

// Main runs barn-net with args (without the program name) and returns the exit
// status.
func Main(ctx context.Context, args []string, stdio tool.Stdio, getenv func(string) string) int {
	return tool.Main(ctx, Name, "Install, inspect and remove the host's private fixed-IP network.", args, stdio, getenv, &grammar{})
}
