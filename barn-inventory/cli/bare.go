package cli

import (
	"os"
	"path/filepath"
	"strings"

	"barn.dev/lib/inventory"
	"barn.dev/lib/predict"
	"barn.dev/lib/tool"
)

// Predictors completes node names from the applied state (explain NODE).
func (*grammar) Predictors(env *tool.Env) map[string]tool.Predictor {
	return map[string]tool.Predictor{"node": func() []string { return predict.Nodes(env.Getenv) }}
}

// Welcome greets a bare `barn-inventory` with the inventory it would read
// here and what to do with it.
func (*grammar) Welcome(env *tool.Env) *tool.Welcome {
	w := &tool.Welcome{}
	wd, _ := os.Getwd()
	file, err := inventory.Discover(wd)
	if err != nil || file == "" {
		w.State = "no inventory here (looked for " + strings.Join(inventory.DiscoveryNames, ", ") + ")"
		w.Actions = []tool.Action{
			{Command: "barn-inventory init trio -o pigsty.yml", Why: "write a 3-node inventory (meta, dual, trio or full)"},
			{Command: "barn-inventory validate -f FILE", Why: "check your own Pigsty inventory"},
		}
		return w
	}
	file = filepath.Base(file)
	w.State = "found " + file
	w.Actions = []tool.Action{
		{Command: "barn-inventory validate", Why: "check " + file + " and list every problem"},
		{Command: "barn-inventory resolve | barn-plan", Why: "see what Barn would create"},
		{Command: "barn-inventory explain NODE", Why: "where each of a node's values came from"},
	}
	return w
}
