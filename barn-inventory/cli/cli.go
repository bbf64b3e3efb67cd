// Package cli is barn-inventory's command line, importable so that tests can run the
// tool in process (testscripts registers it as a command).
package cli

import (
	"context"

	"barn.dev/lib/tool"
)

// Name is the tool's name as printed in errors.
const Name = "barn-inventory"

// grammar is the kong command tree.
type grammar struct {
	Resolve  resolveCmd  `cmd:"" help:"Print the resolved spec (barn.spec/v1) of an inventory."`
	Validate validateCmd `cmd:"" aliases:"v" help:"Check an inventory and list every problem (barn.validation/v1); exit 2 when invalid."`
	Explain  explainCmd  `cmd:"" help:"Show where each value of one node came from (barn.explain/v1)."`
	Init     initCmd     `cmd:"" help:"Write a starting inventory (meta, dual, trio or full: 1–4 nodes)."`
	tool.Globals
}

// Main runs barn-inventory with args (without the program name) and returns the exit
// status.
func Main(ctx context.Context, args []string, stdio tool.Stdio, getenv func(string) string) int {
	return tool.Main(ctx, Name, "Turn a Pigsty inventory into Barn's resolved spec (barn.spec/v1).", args, stdio, getenv, &grammar{})
}
