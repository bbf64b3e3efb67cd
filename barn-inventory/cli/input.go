package cli

import (
	"os"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/inventory"
	"barn.dev/lib/tool"
)

// fileFlag selects the inventory: -f FILE, -f DIR, -f - for stdin, or
// discovery (barn.yml, barn.yaml, pigsty.yml, pigsty.yaml in the working
// directory; the first existing one wins and its errors are reported).
type fileFlag struct {
	File string `short:"f" placeholder:"FILE" predictor:"yaml" help:"Inventory: a file (with the group_vars/ and host_vars/ beside it), a directory of inventory files (as ansible-inventory -i DIR reads it, its group_vars/ and host_vars/ inside), or - for stdin (no group_vars/ or host_vars/: refused when ./group_vars or ./host_vars exists). Default: the first of barn.yml, barn.yaml, pigsty.yml, pigsty.yaml here."`
}

// read returns the inventory with every source Ansible reads for it.
func (f fileFlag) read(env *tool.Env) (*inventory.Input, error) {
	switch f.File {
	case "-":
		data, err := inventory.ReadLimited(env.In, "<stdin>")
		if err != nil {
			return nil, err
		}
		wd, err := os.Getwd()
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Runtime, err, "working directory")
		}
		return inventory.Stdin(data, wd)
	case "":
		wd, err := os.Getwd()
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Runtime, err, "working directory")
		}
		path, err := inventory.Discover(wd)
		if err != nil {
			return nil, err
		}
		return inventory.Open(path[len(wd)+1:])
	}
	return inventory.Open(f.File)
}

// warn prints resolve-time warnings on stderr.
func warn(env *tool.Env, ws []inventory.Warning) {
	for _, w := range ws {
		env.Stderrf("%s: warning: %s", env.Tool, w.Message)
	}
}
