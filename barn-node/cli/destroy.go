package cli

import (
	"fmt"
	"strings"

	"barn.dev/lib/lifecycle"
	"barn.dev/lib/state"
	"barn.dev/lib/tool"
)

type destroyCmd struct {
	jobsFlag
	Force            bool     `help:"Do not ask for confirmation (required without a terminal)."`
	DeletePersistent bool     `help:"Also delete persistent disks, retained ones included (whole deployment only)."`
	Purge            bool     `help:"Also delete persistent disks, keys and deployment state, and the state root once only Barn's lock files are left (whole deployment only)."`
	Nodes            []string `arg:"" optional:"" name:"node" predictor:"node" help:"Nodes to destroy (default: the whole deployment)."`
}

func (c *destroyCmd) Run(env *tool.Env) error {
	jobs, err := c.jobs(env)
	if err != nil {
		return err
	}
	what := "the whole deployment"
	if len(c.Nodes) > 0 {
		what = strings.Join(c.Nodes, ", ")
	}
	keep := "persistent disks, keys, images and the network are kept"
	switch {
	case c.Purge:
		keep = "persistent disks and keys are deleted too; images and the network are kept"
	case c.DeletePersistent:
		keep = "persistent disks are deleted too; keys, images and the network are kept"
	}
	if len(c.Nodes) == 0 || !(c.Purge || c.DeletePersistent) {
		if err := env.Confirm(c.Force, false, "destroy", fmt.Sprintf("Destroy %s (%s).", what, keep)); err != nil {
			return err
		}
	}
	m, err := manager(env, false, false)
	if err != nil {
		return err
	}
	m.Concurrency = jobs
	res, err := m.Destroy(env.Ctx, c.Nodes, lifecycle.DestroyOptions{DeletePersistent: c.DeletePersistent, Purge: c.Purge})
	if err == nil && c.Purge && len(c.Nodes) == 0 {
		if err = purgeSnapshots(env, res); err == nil {
			err = removeStateRoot(env, m.Root, res)
		}
	}
	refreshFragment(env, res)
	return emit(env, resultOrNil(res), err)
}

type purgeCmd struct{}

func (c *purgeCmd) Run(env *tool.Env) error {
	m, err := manager(env, false, false)
	if err != nil {
		return err
	}
	res, err := m.Purge(env.Ctx)
	if err == nil {
		if err = purgeSnapshots(env, res); err == nil {
			err = removeStateRoot(env, m.Root, res)
		}
	}
	refreshFragment(env, res)
	return emit(env, resultOrNil(res), err)
}

// removeStateRoot ends a whole-deployment purge: when nothing but Barn's
// idle lock files is left under BARN_HOME (the image cache gone too, by
// barn-repo purge), the state root itself goes, and the runtime directory
// when it is empty and Barn chose it (BARN_RUNTIME_DIR unset); otherwise
// the result's notes say what keeps it and which command removes that.
func removeStateRoot(env *tool.Env, root *state.Root, res *lifecycle.Result) error {
	rr, err := root.RemoveRoot(env.Ctx, "barn-node purge", env.Getenv("BARN_RUNTIME_DIR") == "")
	if err != nil {
		return err
	}
	if res == nil {
		return nil
	}
	for _, p := range rr.Removed {
		switch p {
		case root.Dir:
			res.Notes = append(res.Notes, "removed the state root "+p+": nothing but Barn's lock files was left")
		case root.RuntimeDir:
			res.Notes = append(res.Notes, "removed the runtime directory "+p)
		}
	}
	for _, k := range rr.Kept {
		res.Notes = append(res.Notes, "kept "+k)
	}
	return nil
}
