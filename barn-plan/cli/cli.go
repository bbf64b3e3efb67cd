// Package cli is barn-plan's command line, importable so that tests can run the
// tool in process (testscripts registers it as a command).
package cli

import (
	"context"

	"barn.dev/lib/tool"
)

// Name is the tool's name as printed in errors.
const Name = "barn-plan"

// grammar is the kong command tree: planning is the default command, so
// `barn-plan [NODE...]` plans and `barn-plan version` prints the version.
type grammar struct {
	Plan planCmd `cmd:"" default:"withargs" aliases:"pl" help:"Plan each node of a barn.spec/v1 against the applied state (read-only)."`
	tool.Globals
}

// Main runs barn-plan with args (without the program name) and returns the exit
// status.
func Main(ctx context.Context, args []string, stdio tool.Stdio, getenv func(string) string) int {
	return tool.Main(ctx, Name, "Compare a resolved spec with applied state and plan each node (barn.plan/v1).", args, stdio, getenv, &grammar{})
}
