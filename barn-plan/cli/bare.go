package cli

import (
	"barn.dev/lib/predict"
	"barn.dev/lib/tool"
)

// Predictors completes node selectors from the applied state.
func (*grammar) Predictors(env *tool.Env) map[string]tool.Predictor {
	return map[string]tool.Predictor{"node": func() []string { return predict.Nodes(env.Getenv) }}
}

// Welcome greets a bare `barn-plan` typed at a terminal, which would
// otherwise wait for a spec on stdin; with a spec piped in, it plans.
func (*grammar) Welcome(env *tool.Env) *tool.Welcome {
	if !env.InIsTerminal {
		return nil
	}
	return &tool.Welcome{
		State: "no barn.spec/v1 on stdin (it is a terminal)",
		Actions: []tool.Action{
			{Command: "barn-inventory resolve -f pigsty.yml | barn-plan", Why: "plan an inventory against the applied state"},
			{Command: "barn-plan -f spec.json", Why: "plan a saved spec"},
			{Command: "barn-inventory resolve -f pigsty.yml | barn-plan | barn-node apply", Why: "plan and apply in one pipeline"},
		},
	}
}
