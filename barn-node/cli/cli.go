// Package cli is barn-node's command line, importable so that tests can run
// the tool in process (testscripts registers it as a command).
package cli

import (
	"context"

	"barn.dev/lib/tool"
)

// Name is the tool's name as printed in errors.
const Name = "barn-node"

// grammar is the kong command tree: the lifecycle commands (lifecycle.go),
// the guest access commands (access.go) and doctor (doctor.go).
type grammar struct {
	lifecycleCommands
	accessCommands
	Doctor doctorCmd `cmd:"" aliases:"dt" help:"Report what this host can run (QEMU, accelerator proven by a smoke start, firmware, ssh, network, state); read-only; exit 3 when a capability is missing."`
	tool.Globals
}

// Main runs barn-node with args (without the program name) and returns the
// exit status.
func Main(ctx context.Context, args []string, stdio tool.Stdio, getenv func(string) string) int {
	return tool.Main(ctx, Name, "Act on nodes: apply a plan, start, stop, recreate, destroy, reach them.", args, stdio, getenv, &grammar{})
}
