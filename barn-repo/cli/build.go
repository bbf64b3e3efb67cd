package cli

import (
	"fmt"
	"io"

	"barn.dev/lib/human"
	"barn.dev/lib/repository"
	"barn.dev/lib/tool"
)

type buildCmd struct {
	rootFlag
	NoQemuImg bool `name:"no-qemu-img" help:"Skip the qemu-img check cross-check (the in-process header check always runs)."`
}

type buildDoc struct{ *repository.BuildResult }

func (d buildDoc) RenderText(w io.Writer) error {
	state := "unchanged"
	if d.Changed {
		state = "written"
	}
	_, err := fmt.Fprintf(w, "%s %s: revision %d, %s, sha256 %s\n", d.Path, state, d.Revision, human.Size(int64(d.Bytes)), d.SHA256)
	return err
}

func (c *buildCmd) Run(env *tool.Env) error {
	root, err := c.dir()
	if err != nil {
		return err
	}
	res, err := repository.Build(env.Ctx, root, repository.Options{SkipQemuImg: c.NoQemuImg})
	if err != nil {
		return err
	}
	return env.Emit(buildDoc{res})
}
