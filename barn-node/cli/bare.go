package cli

import (
	"fmt"

	"barn.dev/lib/predict"
	"barn.dev/lib/state"
	"barn.dev/lib/tool"
)

// Predictors completes node names from the applied state.
func (*grammar) Predictors(env *tool.Env) map[string]tool.Predictor {
	return map[string]tool.Predictor{"node": func() []string { return predict.Nodes(env.Getenv) }}
}

// Welcome greets a bare `barn-node` with what is applied and what to do next.
func (*grammar) Welcome(env *tool.Env) *tool.Welcome {
	w := &tool.Welcome{}
	root, err := state.Inspect(env.Getenv)
	if err != nil {
		w.State = err.Error()
		w.Actions = []tool.Action{{Command: "barn-state path", Why: "see which state root Barn uses"}}
		return w
	}
	d, err := root.ReadDeployment()
	if err != nil {
		w.Err = err
		return w
	}
	if d == nil {
		w.State = "no deployment under " + root.Dir
		w.Actions = []tool.Action{
			{Command: "barn-node doctor", Why: "check what this host can run (QEMU, KVM or TCG, firmware, ssh, network)"},
			{Command: "barn-inventory init trio -o pigsty.yml", Why: "write a 3-node inventory (or bring your own Pigsty inventory)"},
			{Command: "barn-net status", Why: "check the host's private network"},
			{Command: "barn-inventory resolve -f pigsty.yml | barn-plan", Why: "see what would be created"},
			{Command: "barn-inventory resolve -f pigsty.yml | barn-plan | barn-node apply", Why: "create and start the lab"},
		}
		return w
	}
	phases := map[string]int{}
	for _, n := range d.Spec.Nodes {
		docs, err := root.ReadNodeDocuments(n.Name)
		if err != nil {
			w.Err = err // damaged evidence is never "not created"
			return w
		}
		phase := "not created"
		switch {
		case docs.State != nil:
			phase = string(docs.State.Phase)
		case docs.Journal != nil:
			phase = string(state.Preparing)
		}
		phases[phase]++
	}
	w.State = fmt.Sprintf("%d node(s) applied (generation %d): %s", len(d.Spec.Nodes), d.Generation, countText(phases))
	first := d.Spec.Control
	if first == "" && len(d.Spec.Nodes) > 0 {
		first = d.Spec.Nodes[0].Name
	}
	w.Actions = []tool.Action{{Command: "barn-node status", Why: "every node with a live identity audit"}}
	if phases[string(state.Stopped)] > 0 {
		w.Actions = append(w.Actions, tool.Action{Command: "barn-node start", Why: "start the stopped nodes"})
	}
	w.Actions = append(w.Actions,
		tool.Action{Command: "barn-node ssh " + first, Why: "open a shell on the control node"},
		tool.Action{Command: "barn-node logs -f " + first, Why: "follow its serial console"},
		tool.Action{Command: "barn-node stop", Why: "stop every node (their disks stay)"},
	)
	return w
}

// countText renders {"running": 2, "stopped": 1} as "2 running, 1 stopped".
func countText(m map[string]int) string {
	s := ""
	for _, k := range []string{"running", "stopped", "not created", "prepared", "starting", "stopping", "preparing", "destroying", "absent"} {
		if m[k] == 0 {
			continue
		}
		if s != "" {
			s += ", "
		}
		s += fmt.Sprintf("%d %s", m[k], k)
	}
	return s
}
