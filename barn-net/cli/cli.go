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
	Status    statusCmd    `cmd:"" aliases:"st" help:"Show the host network: backend, bridge, address, helper, bridge.conf, manifest, attached nodes and every finding with its fix (read-only)."`
	Plan      planCmd      `cmd:"" help:"Print the install plan without changing anything (--propose: the first free /24 for a generated inventory)."`
	Install   installCmd   `cmd:"" aliases:"i" help:"Install the network as a transaction (asks on a terminal; without one and without --yes only prints the plan)."`
	Uninstall uninstallCmd `cmd:"" aliases:"u" help:"Remove what the manifest records and restore the prestate exactly."`
	Hosts     hostsCmd     `cmd:"" help:"Publish or remove the lab's node names in the host's /etc/hosts (a marked, recorded, reversible block)."`
	Fault     faultCmd     `cmd:"" help:"Inject, list and heal network faults on the private network (isolate, partition, degrade, heal, list)."`
	Preflight preflightCmd `cmd:"" help:"Is the private network usable by this user now (exit 3 with next: barn-net install when not)."`
	tool.Globals
}

// Main runs barn-net with args (without the program name) and returns the exit
// status.
func Main(ctx context.Context, args []string, stdio tool.Stdio, getenv func(string) string) int {
	return tool.Main(ctx, Name, "Install, inspect and remove the host's private fixed-IP network.", args, stdio, getenv, &grammar{})
}
