package cli

import (
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/hostnet"
	"barn.dev/lib/lazyre"
	"barn.dev/lib/tool"
)

// barn-net owns network faults for the reason it owns the bridge: they are
// root-owned changes to host-global kernel state (an nftables table, a
// qdisc on a tap) that must be recorded and undone exactly, and a guest
// must not be able to undo them (lib/hostnet/fault.go says why host side).
// barn-node stays unprivileged and only names the nodes: NODE is a private
// address, or a name looked up in the barn.hosts/v1 document on stdin
// (barn-node hosts | sudo barn-net fault isolate pg-test-1).
type faultCmd struct {
	Isolate   faultIsolateCmd   `cmd:"" help:"Cut NODE off from every peer and from the host's private address."`
	Partition faultPartitionCmd `cmd:"" help:"Cut GROUP1 from GROUP2 (comma-separated nodes), both ways unless --one-way."`
	Degrade   faultDegradeCmd   `cmd:"" help:"netem on NODE's private link (packets delivered to the node): --delay, --jitter, --loss, --rate."`
	Heal      faultHealCmd      `cmd:"" help:"Remove the faults named (or --all) by their record, and nothing else."`
	List      faultListCmd      `cmd:"" aliases:"ls" help:"The recorded faults with their age and whether the host enforces them (read-only)."`
}

// FaultResult is barn.net.fault/v1: what a fault command did.
type FaultResult struct {
	Schema string          `json:"schema"`
	Action string          `json:"action"` // inject | heal
	Faults []hostnet.Fault `json:"faults"`
}

// RenderText implements tool.TextRenderer.
func (r FaultResult) RenderText(w io.Writer) error {
	if len(r.Faults) == 0 {
		_, err := fmt.Fprintf(w, "%s: no fault\n", r.Action)
		return err
	}
	for _, f := range r.Faults {
		fmt.Fprintf(w, "%s %s: %s\n", map[string]string{"inject": "injected", "heal": "healed"}[r.Action], f.ID, f.Describe())
	}
	return nil
}

// members resolves groups of NODE arguments, one []Member per group: an
// IPv4 address stands for itself, a name needs the barn.hosts/v1 document
// on stdin, read at most once for all groups (stdin can be read only once,
// so a partition's second group looks names up in the same document).
func members(env *tool.Env, groups ...[]string) ([][]hostnet.Member, error) {
	var doc *HostsDoc
	out := make([][]hostnet.Member, len(groups))
	for g, args := range groups {
		out[g] = []hostnet.Member{}
		for _, a := range args {
			if ip, err := netip.ParseAddr(a); err == nil && ip.Is4() {
				out[g] = append(out[g], hostnet.Member{Name: a, Address: a})
				continue
			}
			if doc == nil {
				d, err := readHosts(env, a)
				if err != nil {
					return nil, err
				}
				doc = d
			}
			m, ok := lookup(doc, a)
			if !ok {
				return nil, exitcode.New(exitcode.Usage, "node %q is not in the hosts document on stdin", a).WithReason("bad_fault").WithNext("barn-node hosts")
			}
			out[g] = append(out[g], m)
		}
	}
	return out, nil
}

// readHosts reads the barn.hosts/v1 document on stdin, needed to look up
// the node name first.
func readHosts(env *tool.Env, first string) (*HostsDoc, error) {
	if env.InIsTerminal {
		return nil, exitcode.New(exitcode.Usage, "node %q is a name, and no hosts document is on stdin to look it up", first).
			WithReason("bad_fault").WithNext("barn-node hosts | sudo barn-net " + strings.Join(env.Args, " "))
	}
	doc := &HostsDoc{}
	if err := env.ReadDocument(env.In, "stdin", "barn.hosts/v1", doc); err != nil {
		return nil, err
	}
	return doc, nil
}

func lookup(doc *HostsDoc, name string) (hostnet.Member, bool) {
	for _, e := range doc.Entries {
		for _, n := range e.Names {
			if n == name {
				return hostnet.Member{Name: name, Address: e.Address}, true
			}
		}
	}
	return hostnet.Member{}, false
}

func inject(env *tool.Env, req hostnet.FaultRequest) error {
	f, err := host(env).AddFault(env.Ctx, req, env.Now())
	if err != nil {
		return err
	}
	return env.Emit(FaultResult{Schema: "barn.net.fault/v1", Action: "inject", Faults: []hostnet.Fault{f}})
}

type faultIsolateCmd struct {
	Node string `arg:"" help:"The node: its private address, or a name from barn.hosts/v1 on stdin."`
}

func (c *faultIsolateCmd) Run(env *tool.Env) error {
	m, err := members(env, []string{c.Node})
	if err != nil {
		return err
	}
	return inject(env, hostnet.FaultRequest{Kind: hostnet.FaultIsolate, A: m[0]})
}

type faultPartitionCmd struct {
	Group1 string `arg:"" help:"Nodes on one side, comma-separated."`
	Group2 string `arg:"" help:"Nodes on the other side, comma-separated."`
	OneWay bool   `name:"one-way" help:"Drop GROUP1's packets to GROUP2 only (GROUP2 still sends to GROUP1)."`
}

func (c *faultPartitionCmd) Run(env *tool.Env) error {
	m, err := members(env, strings.Split(c.Group1, ","), strings.Split(c.Group2, ","))
	if err != nil {
		return err
	}
	return inject(env, hostnet.FaultRequest{Kind: hostnet.FaultPartition, A: m[0], B: m[1], OneWay: c.OneWay})
}

type faultDegradeCmd struct {
	Node   string        `arg:"" help:"The node: its private address, or a name from barn.hosts/v1 on stdin."`
	Delay  time.Duration `help:"Added delay (e.g. 200ms)."`
	Jitter time.Duration `help:"Delay variation (with --delay)."`
	Loss   float64       `help:"Packet loss in percent (0-100)."`
	Rate   string        `help:"Rate limit in tc's syntax (e.g. 1mbit)."`
}

func (c *faultDegradeCmd) Run(env *tool.Env) error {
	n := &hostnet.Netem{DelayUS: c.Delay.Microseconds(), JitterUS: c.Jitter.Microseconds(), LossPct: c.Loss, Rate: c.Rate}
	if err := checkNetem(c, n); err != nil {
		return err
	}
	m, err := members(env, []string{c.Node})
	if err != nil {
		return err
	}
	return inject(env, hostnet.FaultRequest{Kind: hostnet.FaultDegrade, A: m[0], Netem: n})
}

// rateRE is tc's rate syntax.
var rateRE = lazyre.New(`^[0-9]+(\.[0-9]+)?([kmg]?bit|[kmg]?bps)$`)

func checkNetem(c *faultDegradeCmd, n *hostnet.Netem) error {
	bad := func(f string, args ...any) error {
		return exitcode.New(exitcode.Usage, f, args...).WithReason("bad_fault")
	}
	switch {
	case c.Delay < 0 || c.Jitter < 0:
		return bad("--delay %s / --jitter %s: durations must not be negative", c.Delay, c.Jitter)
	case c.Jitter > 0 && c.Delay == 0:
		return bad("--jitter %s needs --delay", c.Jitter)
	case c.Loss < 0 || c.Loss > 100:
		return bad("--loss %g: a percentage from 0 to 100", c.Loss)
	case c.Rate != "" && !rateRE.MatchString(c.Rate):
		return bad("--rate %q: a number and a unit (bit, kbit, mbit, gbit, bps, kbps, mbps, gbps)", c.Rate)
	case len(n.Args()) == 0:
		return bad("degrade needs at least one of --delay, --loss, --rate")
	}
	return nil
}

type faultHealCmd struct {
	IDs []string `arg:"" optional:"" name:"fault" help:"Fault IDs (barn-net fault list)."`
	All bool     `help:"Heal every recorded fault."`
}

func (c *faultHealCmd) Run(env *tool.Env) error {
	if c.All == (len(c.IDs) > 0) {
		return exitcode.New(exitcode.Usage, "name the faults to heal, or --all (not both)").WithReason("bad_fault").WithNext("barn-net fault list")
	}
	healed, err := host(env).HealFaults(env.Ctx, c.IDs, c.All)
	if err != nil {
		return err
	}
	return env.Emit(FaultResult{Schema: "barn.net.fault/v1", Action: "heal", Faults: healed})
}

// FaultList is barn.net.faults.list/v1.
type FaultList struct {
	Schema string              `json:"schema"`
	Faults []hostnet.FaultView `json:"faults"`
}

// RenderText implements tool.TextRenderer.
func (l FaultList) RenderText(w io.Writer) error {
	if len(l.Faults) == 0 {
		_, err := fmt.Fprintln(w, "no network fault")
		return err
	}
	for _, f := range l.Faults {
		state := "enforced"
		if !f.Enforced {
			state = "NOT enforced: " + f.Problem + "; next: " + f.Next
		}
		fmt.Fprintf(w, "%s  %-40s  age %s  %s\n", f.ID, f.Describe(), time.Duration(f.AgeSeconds)*time.Second, state)
	}
	return nil
}

type faultListCmd struct{}

func (c *faultListCmd) Run(env *tool.Env) error {
	v, err := host(env).FaultViews(env.Ctx, env.Now())
	if err != nil {
		return err
	}
	return env.Emit(FaultList{Schema: "barn.net.faults.list/v1", Faults: v})
}
