package cli

import (
	"errors"
	"io/fs"
	"os"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/inventory"
	"barn.dev/lib/safefile"
	"barn.dev/lib/tool"
)

// InitDoc is printed after init wrote a file.
type InitDoc struct {
	Schema   string `json:"schema"` // barn.init/v1
	Path     string `json:"path"`
	Template string `json:"template"`
	CIDR     string `json:"cidr"`
}

type initCmd struct {
	Template string `arg:"" optional:"" enum:"meta,dual,trio,full" default:"meta" help:"meta (1 node), dual (2), trio (3) or full (4)."`
	Output   string `short:"o" placeholder:"FILE" default:"pigsty.yml" help:"Where to write; - for stdout."`
	CIDR     string `name:"cidr" default:"10.10.10.0/24" help:"The private /24 of the lab."`
	Force    bool   `help:"Overwrite an existing file."`
}

func (c *initCmd) Run(env *tool.Env) error {
	data, err := inventory.Template(c.Template, c.CIDR)
	if err != nil {
		return err
	}
	if c.Output == "-" {
		_, err := env.Out.Write(data)
		return err
	}
	fi, err := os.Lstat(c.Output)
	switch {
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		return exitcode.New(exitcode.Conflict, "%s is a symlink; init never writes through one", c.Output).WithReason("symlink")
	case err == nil && !c.Force:
		return exitcode.New(exitcode.Conflict, "%s already exists", c.Output).WithReason("exists").
			WithNext("barn-inventory init " + c.Template + " -o " + c.Output + " --force")
	case err == nil && !fi.Mode().IsRegular():
		return exitcode.New(exitcode.Conflict, "%s exists and is not a regular file", c.Output)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return exitcode.Wrap(exitcode.Runtime, err, "init")
	}
	if err := safefile.Write(c.Output, data, 0o644); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "writing %s", c.Output)
	}
	return env.Emit(InitDoc{Schema: "barn.init/v1", Path: c.Output, Template: c.Template, CIDR: c.CIDR})
}
