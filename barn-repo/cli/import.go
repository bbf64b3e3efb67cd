package cli

import (
	"fmt"
	"io"

	"barn.dev/lib/catalog"
	"barn.dev/lib/imagecache"
	"barn.dev/lib/tool"
)

type importCmd struct {
	File       string `arg:"" predictor:"qcow2" placeholder:"FILE" help:"A qcow2 file (.qcow2 or .img)."`
	SHA256     string `name:"sha256" required:"" placeholder:"HEX" help:"The SHA-256 you expect the file to have."`
	Name       string `name:"name" placeholder:"local-NAME" help:"Selector name for the import (with --boot and --source-user)."`
	Boot       string `name:"boot" placeholder:"bios|uefi" help:"Firmware the image needs."`
	SourceUser string `name:"source-user" placeholder:"USER" help:"The image's own default user."`
}

type importDoc struct {
	Schema string             `json:"schema"`
	Image  catalog.LocalImage `json:"image"`
}

func (d importDoc) RenderText(w io.Writer) error {
	_, err := fmt.Fprintf(w, "imported %s as %s (%s)\n", d.Image.File, d.Image.Release, d.Image.Name)
	return err
}

func (c *importCmd) Run(env *tool.Env) error {
	cl, err := openClient(env)
	if err != nil {
		return err
	}
	li, err := imagecache.Import(env.Ctx, cl.root, c.File, imagecache.ImportOptions{SHA256: c.SHA256, Name: c.Name, Boot: c.Boot, SourceUser: c.SourceUser})
	if err != nil {
		return err
	}
	env.Stderrf("barn-repo: note: import does not clean credentials, install cloud-init or prove the image boots")
	return env.Emit(importDoc{Schema: "barn.repo.import/v1", Image: li})
}
