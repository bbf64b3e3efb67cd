package cli

import (
	"fmt"
	"io"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/human"
	"barn.dev/lib/imagecache"
	"barn.dev/lib/state"
	"barn.dev/lib/tool"
)

type purgeCmd struct {
	DryRun bool `name:"dry-run" help:"Only list what would be removed."`
	Yes    bool `name:"yes" help:"Remove without asking."`
}

type purgeDoc struct{ *imagecache.PurgeResult }

// RenderText lists what was (or would be) removed, then a total.
func (d purgeDoc) RenderText(w io.Writer) error {
	verb := "removed"
	if d.DryRun {
		verb = "would remove"
	}
	for _, p := range d.Removed {
		fmt.Fprintf(w, "%s %s\n", verb, p)
	}
	_, err := fmt.Fprintf(w, "%s: %d entr%s, %s\n", d.Dir, len(d.Removed), map[bool]string{true: "y", false: "ies"}[len(d.Removed) == 1], human.Size(d.Bytes))
	return err
}

func (c *purgeCmd) Run(env *tool.Env) error {
	if c.DryRun == c.Yes {
		return exitcode.New(exitcode.Usage, "give exactly one of --dry-run or --yes").WithNext("barn-repo purge --dry-run")
	}
	root, err := state.Inspect(env.Getenv) // creates nothing: a missing cache is an empty purge
	if err != nil {
		return err
	}
	res, err := imagecache.Purge(env.Ctx, root, c.DryRun)
	if err != nil {
		return err
	}
	return env.Emit(purgeDoc{res})
}
