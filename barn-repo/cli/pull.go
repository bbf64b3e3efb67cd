package cli

import (
	"fmt"
	"io"

	"barn.dev/lib/imagecache"
	"barn.dev/lib/imageref"
	"barn.dev/lib/tool"
)

type pullCmd struct {
	sourceFlags
	Selector string    `arg:"" predictor:"image" help:"Image selector."`
	Arch     tool.Arch `name:"arch" default:"native" predictor:"arch" help:"Architecture (native, amd64, arm64; x86_64/x64 and aarch64/a64 are aliases; any case)."`
}

type pullDoc struct {
	Schema string            `json:"schema"`
	Image  imageref.Identity `json:"image"`
	Path   string            `json:"path"`
	// SetAside is the damaged file the pull moved out of the way first.
	SetAside *imagecache.SetAside `json:"set_aside,omitempty"`
}

func (d pullDoc) RenderText(w io.Writer) error {
	_, err := fmt.Fprintf(w, "%s@%s %s verified at %s\n", d.Image.Image, d.Image.Version, d.Image.Arch, d.Path)
	return err
}

func (c *pullCmd) Run(env *tool.Env) error {
	cl, err := openClient(env)
	if err != nil {
		return err
	}
	src, cat, _, err := cl.active(env, c.sourceFlags)
	if err != nil {
		return err
	}
	id, err := cat.Resolve(c.Selector, string(c.Arch))
	if err != nil {
		return err
	}
	cache := &imagecache.Cache{Root: cl.root, Puller: imagecache.Puller{Progress: progressWriter(env), Now: cl.root.Now}}
	e, err := cache.Fetch(env.Ctx, id, &src)
	if e.SetAside != nil {
		env.Stderrf("%s", e.SetAside.Notice(cl.root.ImagesDir()))
	}
	if err != nil {
		return err
	}
	return env.Emit(pullDoc{Schema: "barn.repo.pull/v1", Image: id, Path: e.Path, SetAside: e.SetAside})
}
