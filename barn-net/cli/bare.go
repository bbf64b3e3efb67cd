package cli

import (
	"fmt"

	"barn.dev/lib/tool"
)

// Welcome greets a bare `barn-net` with what is installed and what to do next.
func (*grammar) Welcome(env *tool.Env) *tool.Welcome {
	h := host(env)
	w := &tool.Welcome{}
	m, err := h.ReadManifest()
	switch {
	case err != nil:
		w.State = err.Error()
		w.Actions = []tool.Action{{Command: "barn-net status", Why: "every finding with its fix"}}
	case m == nil:
		w.State = "no Barn network installed (no manifest at " + h.ManifestPath() + ")"
		w.Actions = []tool.Action{
			{Command: "barn-net plan", Why: "see exactly what install would change"},
			{Command: "sudo barn-net install", Why: "install the bridge as a reversible transaction (asks first)"},
		}
	default:
		w.State = fmt.Sprintf("%s installed on %s (%s backend, host %s)", m.CIDR, m.Bridge, m.Backend, m.HostAddress)
		w.Actions = []tool.Action{
			{Command: "barn-net status", Why: "check it is ready for this user"},
			{Command: "barn-node hosts | sudo barn-net hosts install", Why: "make the nodes' names resolvable on this host"},
			{Command: "sudo barn-net uninstall", Why: "remove it and restore the prestate (asks first)"},
		}
	}
	return w
}
