package cli

import (
	"fmt"
	"io"
	"os"

	"barn.dev/lib/catalog"
	"barn.dev/lib/human"
	"barn.dev/lib/imagecache"
	"barn.dev/lib/imageref"
	"barn.dev/lib/tool"
)

type infoCmd struct {
	sourceFlags
	Selector string    `arg:"" predictor:"image" help:"Image selector: family, alias, family:channel, family@version or local-NAME."`
	Arch     tool.Arch `name:"arch" default:"native" predictor:"arch" help:"Architecture (native, amd64, arm64; x86_64/x64 and aarch64/a64 are aliases; any case)."`
}

type infoDoc struct {
	Schema     string            `json:"schema"`
	Repository catalog.Source    `json:"repository"`
	Revision   uint64            `json:"revision"`
	Image      imageref.Identity `json:"image"`
	Upstream   string            `json:"upstream"`
	Provenance string            `json:"provenance"`
	CachePath  string            `json:"cache_path"`
	Cached     bool              `json:"cached"`
}

func (d infoDoc) RenderText(w io.Writer) error {
	i := d.Image
	fmt.Fprintf(w, "%s → %s@%s %s (%s, %s)\n", i.Selector, i.Image, i.Version, i.Arch, i.Boot, i.Status)
	fmt.Fprintf(w, "  file %s, %s, sha256 %s, virtual size %s\n", i.File, human.Size(i.SizeBytes), i.SHA256, human.Size(i.VirtualSize))
	fmt.Fprintf(w, "  source user %s; cached %v at %s\n", i.SourceUser, d.Cached, d.CachePath)
	return nil
}

func (c *infoCmd) Run(env *tool.Env) error {
	cl, err := openClient(env)
	if err != nil {
		return err
	}
	src, cat, rec, err := cl.active(env, c.sourceFlags)
	if err != nil {
		return err
	}
	id, err := cat.Resolve(c.Selector, string(c.Arch))
	if err != nil {
		return err
	}
	doc := infoDoc{Schema: "barn.repo.info/v1", Repository: src, Revision: rec.ActiveRevision, Image: id, CachePath: imagecache.CachePath(cl.store.Dir, id)}
	if im, ok := cat.Images[id.Image]; ok {
		v := im.Versions[id.Version]
		doc.Upstream, doc.Provenance = v.Variants[id.Arch].Upstream, v.Variants[id.Arch].Provenance
	}
	_, serr := os.Lstat(doc.CachePath)
	doc.Cached = serr == nil
	return env.Emit(doc)
}
