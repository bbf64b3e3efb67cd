package cli

import (
	"fmt"
	"io"
	"os"
	"sort"

	"barn.dev/lib/catalog"
	"barn.dev/lib/imagecache"
	"barn.dev/lib/imageref"
	"barn.dev/lib/tool"
)

type listCmd struct {
	repoFlag
}

type listEntry struct {
	imageref.Identity
	Aliases  []string `json:"aliases"`
	Channels []string `json:"channels"` // channels pointing at this version
	Cached   bool     `json:"cached"`   // a file exists at the cache path (verified on use)
}

type listDoc struct {
	Schema     string               `json:"schema"`
	Repository catalog.Source       `json:"repository"`
	Record     *catalog.Record      `json:"record"`
	Images     []listEntry          `json:"images"`
	Local      []catalog.LocalImage `json:"local"`
}

func (d listDoc) RenderText(w io.Writer) error {
	fmt.Fprintf(w, "%s: catalog revision %d\n", d.Repository.Root, d.Record.ActiveRevision)
	for _, e := range d.Images {
		c := ""
		if e.Cached {
			c = " cached"
		}
		fmt.Fprintf(w, "  %-8s %-24s %-6s %-5s %-10s %v%s\n", e.Image, e.Version, e.Arch, e.Boot, e.Status, e.Channels, c)
	}
	for _, l := range d.Local {
		fmt.Fprintf(w, "  %-8s %-24s %-6s %-5s imported %s\n", l.Name, l.Release, l.Arch, l.Boot, l.File)
	}
	return nil
}

func (c *listCmd) Run(env *tool.Env) error {
	cl, err := openClient(env)
	if err != nil {
		return err
	}
	src, cat, rec, err := cl.active(env, c.repoFlag)
	if err != nil {
		return err
	}
	doc := listDoc{Schema: "barn.repo.list/v1", Repository: src, Record: rec, Images: []listEntry{}, Local: []catalog.LocalImage{}}
	for _, id := range cat.Identities() {
		im := cat.Images[id.Image]
		chans := []string{}
		for ch, v := range im.Channels {
			if v == id.Version {
				chans = append(chans, ch)
			}
		}
		sort.Strings(chans)
		_, serr := os.Lstat(imagecache.CachePath(cl.store.Dir, id))
		doc.Images = append(doc.Images, listEntry{Identity: id, Aliases: append([]string{}, im.Aliases...), Channels: chans, Cached: serr == nil})
	}
	local, err := catalog.ReadLocal(cl.store.Dir)
	if err != nil {
		return err
	}
	for _, k := range sortedKeys(local.Images) {
		doc.Local = append(doc.Local, local.Images[k])
	}
	return env.Emit(doc)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
