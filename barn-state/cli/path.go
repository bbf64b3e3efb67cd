package cli

import (
	"fmt"
	"io"

	"barn.dev/lib/tool"
)

// PathCmd prints where the state root and runtime directory are.
type PathCmd struct{}

// PathDoc is barn.state.path/v1.
type PathDoc struct {
	Schema     string `json:"schema"`
	Root       string `json:"root"`
	RuntimeDir string `json:"runtime_dir"`
	Exists     bool   `json:"exists"`
}

// RenderText implements tool.TextRenderer.
func (d PathDoc) RenderText(w io.Writer) error {
	_, err := fmt.Fprintf(w, "root:    %s\nruntime: %s\n", d.Root, d.RuntimeDir)
	return err
}

// Run prints the paths.
func (c *PathCmd) Run(env *tool.Env) error {
	r, err := inspect(env)
	if err != nil {
		return err
	}
	return env.Emit(PathDoc{Schema: "barn.state.path/v1", Root: r.Dir, RuntimeDir: r.RuntimeDir, Exists: r.Exists()})
}
