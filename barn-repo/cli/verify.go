package cli

import (
	"fmt"
	"io"

	"barn.dev/lib/repository"
	"barn.dev/lib/tool"
)

type verifyCmd struct {
	rootFlag
	NoQemuImg bool `name:"no-qemu-img" help:"Skip the qemu-img check cross-check."`
}

type verifyDoc struct{ *repository.VerifyResult }

func (d verifyDoc) RenderText(w io.Writer) error {
	_, err := fmt.Fprintf(w, "%s verified: revision %d matches repo.yaml and images/\n", d.Path, d.Revision)
	return err
}

func (c *verifyCmd) Run(env *tool.Env) error {
	root, err := c.dir()
	if err != nil {
		return err
	}
	res, err := repository.Verify(env.Ctx, root, repository.Options{SkipQemuImg: c.NoQemuImg})
	if err != nil {
		return err
	}
	return env.Emit(verifyDoc{res})
}
