package cli

import (
	"barn.dev/lib/guest"
	"barn.dev/lib/tool"
)

type sshCmd struct {
	Args []string `arg:"" optional:"" passthrough:"" name:"node-or-command" help:"[NODE] [-- CMD...]"`
}

// Run opens an interactive shell, or runs CMD words through the remote
// shell (joined by spaces). The exit status passes through unchanged.
func (c *sshCmd) Run(env *tool.Env) error {
	a, err := loadAccess(env)
	if err != nil {
		return err
	}
	args := c.Args
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	node := ""
	switch {
	case len(args) > 0 && a.known(args[0]):
		node, args = args[0], args[1:]
		if len(args) > 0 && args[0] == "--" {
			args = args[1:]
		}
	case len(args) > 0 && !dashDash(env) || len(args) == 1:
		if s := a.nearMiss(args[0]); s != "" {
			_, err := a.resolve(args[0])
			return err
		}
		if len(args) == 1 && !dashDash(env) {
			env.Stderrf("warning: %q is not a node; running it on the default node", args[0])
		}
	}
	if node == "" {
		if node, err = a.defaultNode(); err != nil {
			return err
		}
	}
	t, err := a.target(env, node)
	if err != nil {
		return err
	}
	code, err := guest.Run(env.Ctx, guest.ShellArgv(t, args, env.InIsTerminal), guest.Streams{In: env.In, Out: env.Out, Err: env.Err})
	if err != nil {
		return err
	}
	return tool.ExitStatus(code)
}
