package cli

import (
	"os"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/inventory"
	"barn.dev/lib/tool"
)

// fileFlag selects the inventory: -f FILE, -f - for stdin, or discovery
// (barn.yml, barn.yaml, pigsty.yml, pigsty.yaml in the working directory;
// the first existing one wins and its errors are reported).
type fileFlag struct {
	File string `short:"f" placeholder:"FILE" predictor:"yaml" help:"Inventory file; - reads stdin. Default: the first of barn.yml, barn.yaml, pigsty.yml, pigsty.yaml here."`
}

// read returns the inventory bytes and the source name used in messages.
func (f fileFlag) read(env *tool.Env) ([]byte, string, error) {
	switch f.File {
	case "-":
		data, err := inventory.ReadLimited(env.In, "<stdin>")
		return data, "<stdin>", err
	case "":
		wd, err := os.Getwd()
		if err != nil {
			return nil, "", exitcode.Wrap(exitcode.Runtime, err, "working directory")
		}
		path, err := inventory.Discover(wd)
		if err != nil {
			return nil, "", err
		}
		name := path[len(wd)+1:]
		data, err := inventory.ReadFile(path)
		return data, name, err
	}
	data, err := inventory.ReadFile(f.File)
	return data, f.File, err
}

// warn prints resolve-time warnings on stderr.
func warn(env *tool.Env, ws []inventory.Warning) {
	for _, w := range ws {
		env.Stderrf("%s: warning: %s", env.Tool, w.Message)
	}
}
