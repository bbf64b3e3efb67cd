package cli

import (
	"fmt"
	"io"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/human"
	"barn.dev/lib/imagecache"
	"barn.dev/lib/tool"
)

type pruneCmd struct {
	DryRun bool `name:"dry-run" help:"Only list what would be removed."`
	Yes    bool `name:"yes" help:"Remove without asking."`
}

type pruneDoc struct{ *imagecache.PruneResult }

func (d pruneDoc) RenderText(w io.Writer) error {
	verb := "removed"
	if d.DryRun {
		verb = "would remove"
	}
	for _, c := range d.Candidates {
		fmt.Fprintf(w, "%s %s\n", verb, c)
	}
	_, err := fmt.Fprintf(w, "%d file(s), %s; %d protected\n", len(d.Candidates), human.Size(d.Bytes), len(d.Protected))
	return err
}

func (c *pruneCmd) Run(env *tool.Env) error {
	if c.DryRun == c.Yes {
		return exitcode.New(exitcode.Usage, "give exactly one of --dry-run or --yes").WithNext("barn-repo prune --dry-run")
	}
	cl, err := openClient(env)
	if err != nil {
		return err
	}
	res, err := imagecache.Prune(env.Ctx, cl.root, c.DryRun)
	if err != nil {
		return err
	}
	return env.Emit(pruneDoc{res})
}
