package cli

import (
	"barn.dev/lib/exitcode"
	"barn.dev/lib/guest"
	"barn.dev/lib/tool"
)

type sshCmd struct {
	Args []string `arg:"" optional:"" passthrough:"" name:"node-or-command" predictor:"node" help:"[NODE] [-- CMD...]"`
}

// Run opens an interactive shell, or runs CMD words through the remote
// shell (joined by spaces). The exit status passes through unchanged.
//
// Before "--" zero or one committed node is accepted (an unknown word there
// is a usage error). Without "--", a first word that is a node selects it;
// a near miss of a node name (containing a digit or '-') is refused with a
// suggestion; any other first word starts a command run on the default
// node (the control node), with a warning.
func (c *sshCmd) Run(env *tool.Env) error {
	a, err := loadAccess(env)
	if err != nil {
		return err
	}
	node, cmd, err := c.split(env, a)
	if err != nil {
		return err
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
	argv, err := guest.ShellArgv(t, cmd, env.InIsTerminal)
	if err != nil {
		return err
	}
	code, err := guest.Run(env.Ctx, argv, guest.Streams{In: env.In, Out: env.Out, Err: env.Err})
	if err != nil {
		return err
	}
	return tool.ExitStatus(code)
}

// split returns the node named on the command line ("" for the default
// node) and the remote command words.
func (c *sshCmd) split(env *tool.Env, a *access) (string, []string, error) {
	args := c.Args
	for i, w := range args {
		if w != "--" {
			continue
		}
		before, cmd := args[:i], args[i+1:]
		switch len(before) {
		case 0:
			return "", cmd, nil
		case 1:
			node, err := a.resolve(before[0])
			return node, cmd, err
		default:
			return "", nil, exitcode.New(exitcode.Usage, "before -- give at most one node, got %q", before).
				WithReason("too_many_nodes").WithNext("barn-node ssh [NODE] -- CMD...")
		}
	}
	if len(args) == 0 {
		return "", nil, nil
	}
	if a.known(args[0]) {
		return args[0], args[1:], nil
	}
	if a.nearMiss(args[0]) != "" {
		_, err := a.resolve(args[0])
		return "", nil, err
	}
	env.Stderrf("warning: %q is not a node; running the command on the default node (put -- before a command to say so)", args[0])
	return "", args, nil
}
