package cli

import (
	"fmt"
	"io"

	"barn.dev/lib/repository"
	"barn.dev/lib/tool"
)

type scanCmd struct {
	rootFlag
}

type scanDoc struct{ *repository.ScanResult }

func (d scanDoc) RenderText(w io.Writer) error {
	fmt.Fprintf(w, "repository %s (revision %d)\n", d.Root, d.Revision)
	for _, p := range d.Tracked {
		fmt.Fprintf(w, "  tracked    %s\n", p)
	}
	for _, p := range d.Missing {
		fmt.Fprintf(w, "  missing    %s\n", p)
	}
	for _, p := range d.Untracked {
		fmt.Fprintf(w, "  untracked  %s\n", p)
	}
	for _, u := range d.Unsafe {
		fmt.Fprintf(w, "  unsafe     %s (%s)\n", u.Path, u.Reason)
	}
	return nil
}

func (c *scanCmd) Run(env *tool.Env) error {
	root, err := c.dir()
	if err != nil {
		return err
	}
	res, err := repository.Scan(root)
	if err != nil {
		return err
	}
	return env.Emit(scanDoc{res})
}
