package cli

import "barn.dev/lib/tool"

// Node faults (lib/lifecycle nodefault.go): pause / resume through QMP
// stop / cont, kill through a verified SIGKILL.

type pauseCmd struct {
	Nodes []string `arg:"" name:"node" predictor:"node" help:"Nodes to pause."`
}

func (c *pauseCmd) Run(env *tool.Env) error {
	m, err := manager(env, true, false)
	if err != nil {
		return err
	}
	res, err := m.Pause(env.Ctx, c.Nodes)
	return emit(env, resultOrNil(res), err)
}

type resumeCmd struct {
	Nodes []string `arg:"" name:"node" predictor:"node" help:"Nodes to resume."`
}

func (c *resumeCmd) Run(env *tool.Env) error {
	m, err := manager(env, true, false)
	if err != nil {
		return err
	}
	res, err := m.Resume(env.Ctx, c.Nodes)
	warnSkew(env, res)
	return emit(env, resultOrNil(res), err)
}

type killCmd struct {
	Nodes []string `arg:"" name:"node" predictor:"node" help:"Nodes whose QEMU to kill."`
}

func (c *killCmd) Run(env *tool.Env) error {
	m, err := manager(env, true, false)
	if err != nil {
		return err
	}
	res, err := m.Kill(env.Ctx, c.Nodes)
	return emit(env, resultOrNil(res), err)
}
