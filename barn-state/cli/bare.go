package cli

import (
	"barn.dev/lib/predict"
	"barn.dev/lib/state"
	"barn.dev/lib/tool"
)

// Predictors completes node names from the state root.
func (*grammar) Predictors(env *tool.Env) map[string]tool.Predictor {
	return map[string]tool.Predictor{"node": func() []string { return predict.Nodes(env.Getenv) }}
}

// Welcome greets a bare `barn-state` with the state root it reads.
func (*grammar) Welcome(env *tool.Env) *tool.Welcome {
	w := &tool.Welcome{Actions: []tool.Action{
		{Command: "barn-state show", Why: "the deployment and a summary of every node"},
		{Command: "barn-state events", Why: "the event log"},
		{Command: "barn-state verify", Why: "check every document, mode and owner"},
	}}
	root, err := state.Inspect(env.Getenv)
	switch {
	case err != nil:
		w.State = err.Error()
	case !root.Exists():
		w.State = "no state root yet at " + root.Dir
	default:
		w.State = "state root " + root.Dir
	}
	return w
}
