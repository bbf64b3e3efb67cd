package cli

import (
	"barn.dev/lib/exitcode"
	"barn.dev/lib/guest"
	"barn.dev/lib/tool"
)

type execCmd struct {
	Node string   `arg:"" predictor:"node" help:"Node to run on."`
	Argv []string `arg:"" optional:"" passthrough:"" help:"-- ARGV... (each argument arrives in the guest exactly as given)."`
}

// Run runs ARGV on the node, single-quoting each argument for the remote
// shell, and exits with the remote status unchanged (255 included).
func (c *execCmd) Run(env *tool.Env) error {
	argv := c.Argv
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	if len(argv) == 0 {
		return exitcode.New(exitcode.Usage, "exec needs a command: barn-node exec NODE -- ARGV...").WithReason("missing_command")
	}
	a, err := loadAccess(env)
	if err != nil {
		return err
	}
	node, err := a.resolve(c.Node)
	if err != nil {
		return err
	}
	t, err := a.target(env, node)
	if err != nil {
		return err
	}
	sshArgv, err := guest.ExecArgv(t, argv)
	if err != nil {
		return err
	}
	code, err := guest.Run(env.Ctx, sshArgv, guest.Streams{In: env.In, Out: env.Out, Err: env.Err})
	if err != nil {
		return err
	}
	return tool.ExitStatus(code)
}
