package cli

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"barn.dev/lib/catalog"
	"barn.dev/lib/human"
	"barn.dev/lib/imagecache"
	"barn.dev/lib/imageref"
	"barn.dev/lib/tool"
)

type listCmd struct {
	sourceFlags
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

// RenderText prints the catalog's images, then the local imports, as one
// table; SIZE is the download (the qcow2 file) in binary units.
func (d listDoc) RenderText(w io.Writer) error {
	fmt.Fprintf(w, "%s: catalog revision %d\n", d.Repository.Root, d.Record.ActiveRevision)
	tw := human.Table(w)
	fmt.Fprintln(tw, "IMAGE\tVERSION\tARCH\tBOOT\tSTATUS\tSIZE\tCHANNELS\tALIASES\tCACHED")
	for _, e := range d.Images {
		c := "no"
		if e.Cached {
			c = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Image, e.Version, e.Arch, e.Boot, e.Status, human.Size(e.SizeBytes), list(e.Channels), list(e.Aliases), c)
	}
	// an import exists only as a file in the cache
	for _, l := range d.Local {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\timported\t%s\t-\t-\tyes\n", dashed(l.Name), l.Release, l.Arch, dashed(l.Boot), human.Size(l.SizeBytes))
	}
	return tw.Flush()
}

func list(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}

func dashed(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (c *listCmd) Run(env *tool.Env) error {
	cl, err := openClient(env)
	if err != nil {
		return err
	}
	src, cat, rec, err := cl.active(env, c.sourceFlags)
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
