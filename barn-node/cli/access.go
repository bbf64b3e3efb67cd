package cli

import (
	"strings"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/guest"
	"barn.dev/lib/human"
	"barn.dev/lib/spec"
	"barn.dev/lib/sshkeys"
	"barn.dev/lib/state"
	"barn.dev/lib/tool"
	"barn.dev/lib/vm"
)

// accessCommands are ssh, exec, ssh-config, hosts, logs, check,
// provision and time.
type accessCommands struct {
	SSH       sshCmd       `cmd:"" name:"ssh" help:"Open a shell on a node (default: the control node), or run a remote shell command after --."`
	Exec      execCmd      `cmd:"" aliases:"ex" help:"Run ARGV on NODE with argument boundaries preserved; exits with the remote status."`
	SSHConfig sshConfigCmd `cmd:"" name:"ssh-config" aliases:"sc" help:"Print, install or remove the ~/.ssh integration (or an Ansible connection inventory)."`
	Hosts     hostsCmd     `cmd:"" help:"Print the applied nodes' hosts-file entries (barn.hosts/v1) for: barn-node hosts | sudo barn-net hosts install."`
	Logs      logsCmd      `cmd:"" aliases:"l" help:"Show a node's serial console, QEMU diagnostics or the deployment event log."`
	Check     checkCmd     `cmd:"" help:"Check the lab from inside: private reachability of every pair, names on every node, the control node's SSH to peers, clock skew (matrix on a terminal, JSON on a pipe; exit 1 on any failure)."`
	Provision provisionCmd `cmd:"" help:"Stream a script to running nodes and report per-node exit codes and output."`
	Time      timeCmd      `cmd:"" help:"Guest clocks: measure them against the host's (time status) or correct them (time sync)."`
}

// access is the applied state the access commands read.
type access struct {
	root  *state.Root
	dep   *state.Deployment
	names []string               // committed nodes, sorted
	nodes map[string]*state.Node // by name
	keys  sshkeys.KeyPair
}

// loadAccess reads the applied deployment and committed nodes (read-only).
func loadAccess(env *tool.Env) (*access, error) {
	root, err := state.Inspect(env.Getenv)
	if err != nil {
		return nil, err
	}
	dep, err := root.ReadDeployment()
	if err != nil {
		return nil, err
	}
	if dep == nil {
		return nil, exitcode.New(exitcode.Conflict, "no deployment under %s", root.Dir).
			WithReason("no_deployment").WithNext("barn-inventory resolve | barn-plan | barn-node apply")
	}
	a := &access{root: root, dep: dep, nodes: map[string]*state.Node{}, keys: sshkeys.Paths(root.KeysDir())}
	names, err := root.NodeNames()
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		st, err := root.ReadNode(n)
		if err != nil {
			return nil, err
		}
		if st != nil {
			a.names = append(a.names, n)
			a.nodes[n] = st
		}
	}
	return a, nil
}

// defaultNode is the control node when committed, else the first
// committed node.
func (a *access) defaultNode() (string, error) {
	if c := a.dep.Spec.Control; c != "" && a.nodes[c] != nil {
		return c, nil
	}
	if len(a.names) > 0 {
		return a.names[0], nil
	}
	return "", exitcode.New(exitcode.Conflict, "the deployment has no nodes").WithReason("no_nodes").WithNext(spec.Pipeline(a.dep.Spec.Source.Inventory(), "barn-node apply"))
}

// known reports whether name is a committed node.
func (a *access) known(name string) bool { return a.nodes[name] != nil }

// nearMiss returns the committed node name s almost is: s contains a digit
// or '-' and is within 1 edit (names of ≤4 characters) or 2 edits.
func (a *access) nearMiss(s string) string {
	if !strings.ContainsAny(s, "0123456789-") {
		return ""
	}
	for _, n := range a.names {
		limit := 2
		if len(n) <= 4 {
			limit = 1
		}
		if d := human.EditDistance(s, n); d > 0 && d <= limit {
			return n
		}
	}
	return ""
}

// resolve returns name when it is a committed node, else a usage error with
// a suggestion.
func (a *access) resolve(name string) (string, error) {
	if a.known(name) {
		return name, nil
	}
	known := "none"
	if len(a.names) > 0 {
		known = strings.Join(a.names, ", ")
	}
	if s := a.nearMiss(name); s != "" {
		return "", exitcode.New(exitcode.Usage, "unknown node %q: did you mean %s? (committed nodes: %s)", name, s, known).
			WithReason("unknown_node").WithDetail(map[string]string{"node": name, "suggestion": s})
	}
	return "", exitcode.New(exitcode.Usage, "unknown node %q (committed nodes: %s)", name, known).
		WithReason("unknown_node").WithNext("barn-node status")
}

// target returns the SSH target of a running node: committed phase
// running with a management port, and not proven gone by a live audit
// (vm.Audit: QMP identity, ≤2 s, and the recorded process tuple).
func (a *access) target(env *tool.Env, name string) (guest.Target, error) {
	st := a.nodes[name]
	if st == nil {
		_, err := a.resolve(name)
		return guest.Target{}, err
	}
	if st.Phase != state.Running || st.SSHPort <= 0 {
		return guest.Target{}, exitcode.New(exitcode.Conflict, "node %s is %s, not running", name, st.Phase).
			WithReason("node_not_running").WithNext("barn-node start " + name)
	}
	// A PID is not a VM, and a recorded phase is not a live guest: when the
	// audit proves the QEMU gone, whatever answers on the port is not it.
	if l := vm.Audit(env.Ctx, vm.Target{Node: st.Node, UUID: st.VMUUID, Runtime: st.Runtime, Invocation: st.Invocation, Process: st.Process}); l.Runtime == vm.RuntimeInactive {
		return guest.Target{}, exitcode.New(exitcode.Conflict, "node %s is recorded running but its QEMU is gone (%s)", name, l.Detail).
			WithReason("node_not_running").WithNext("barn-node start " + name)
	}
	return guest.Target{
		Node: name, Port: st.SSHPort, User: a.dep.Spec.Deployment.User.Name, Keys: a.keys,
		VMUUID: st.VMUUID, Generation: st.Generation, SpecHash: st.ReadyHash(), SSH: env.Getenv("BARN_SSH"),
	}, nil
}
