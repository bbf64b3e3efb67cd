package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/guest"
	"barn.dev/lib/tool"
)

// checkCmd is what a Pigsty user checks before a test: from every selected
// node (one SSH session each, over the management NIC, which faults never
// touch) it pings every other node's private address, resolves every
// node's name, FQDN and aliases, and on the control node also reads every
// peer's SSH banner over the private network; then it measures the clock
// (guest.ReadClock, the one measurement `time status` and start use). The
// probe is plain POSIX sh with ping, getent and date: nothing is installed
// in the guest.
type checkCmd struct {
	Nodes []string `arg:"" optional:"" name:"node" predictor:"node" help:"Nodes to check from and to (default: every committed node)."`
	clockFlags
}

// CheckDoc is barn.check/v1.
type CheckDoc struct {
	Schema  string         `json:"schema"`
	OK      bool           `json:"ok"`
	Nodes   []string       `json:"nodes"`
	Reach   []CheckPair    `json:"reach"`   // ping over the private network, every ordered pair
	SSH     []CheckPair    `json:"ssh"`     // control node → peer sshd over the private network
	Resolve []CheckResolve `json:"resolve"` // every name on every node
	Clock   []CheckClock   `json:"clock"`
	Errors  []CheckError   `json:"errors"` // nodes whose probe did not run
}

// CheckPair is one directed probe.
type CheckPair struct {
	From string `json:"from"`
	To   string `json:"to"`
	OK   bool   `json:"ok"`
}

// CheckResolve is one name looked up on one node.
type CheckResolve struct {
	On   string `json:"on"`
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"` // "" when it does not resolve
	OK   bool   `json:"ok"`
}

// CheckClock is one node's clock against the host's.
type CheckClock struct {
	Node string `json:"node"`
	ClockReading
}

// CheckError is a node whose probe could not run.
type CheckError struct {
	Node  string `json:"node"`
	Error string `json:"error"`
}

type checkPeer struct{ name, addr string }

func (c *checkCmd) Run(env *tool.Env) error {
	a, err := loadAccess(env)
	if err != nil {
		return err
	}
	names := c.Nodes
	if len(names) == 0 {
		names = a.names
	}
	var peers []checkPeer
	for _, n := range names {
		if _, err := a.resolve(n); err != nil {
			return err
		}
		peers = append(peers, checkPeer{n, a.nodes[n].Spec.Address})
	}
	doc := CheckDoc{Schema: "barn.check/v1", Nodes: names, Reach: []CheckPair{}, SSH: []CheckPair{}, Resolve: []CheckResolve{}, Clock: []CheckClock{}, Errors: []CheckError{}}
	want := map[string]string{} // every name → its address
	for _, n := range names {
		sn := a.nodes[n].Spec
		for _, x := range append([]string{n, sn.FQDN}, sn.Aliases...) {
			if x != "" {
				want[x] = sn.Address
			}
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := c.probe(env, a, p, peers, want, a.nodes[p.name].Spec.Control) // built as the control node (a promoted one holds no deployment key)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				doc.Errors = append(doc.Errors, CheckError{p.name, err.Error()})
				return
			}
			r.mergeInto(&doc)
		}()
	}
	wg.Wait()
	doc.sort()
	doc.OK = doc.ok()
	if err := env.Emit(doc); err != nil {
		return err
	}
	if !doc.OK {
		return tool.Reported(exitcode.New(exitcode.Runtime, "the lab check failed (see the matrix)").WithReason("check_failed"))
	}
	return nil
}

// probeScript is the guest side: one line per result, the peers probed
// side by side (a cut-off peer costs one bound, not one per peer).
//
//	reach ADDR ok|fail       ping -c1 -W2 over the private network
//	resolve NAME ADDR|-      getent hosts NAME (first address)
//	ssh ADDR ok|fail         (control node) an SSH banner from ADDR:22 within banner seconds
func probeScript(peers []string, names []string, ssh bool, banner int) string {
	var b strings.Builder
	b.WriteString("export LC_ALL=C\n")
	for _, p := range peers {
		fmt.Fprintf(&b, "( if ping -n -c1 -W2 %s >/dev/null 2>&1; then echo reach %s ok; else echo reach %s fail; fi\n", p, p, p)
		if ssh {
			fmt.Fprintf(&b, "  if timeout %d bash -c 'exec 3<>/dev/tcp/%s/22; head -c4 <&3' 2>/dev/null | grep -q SSH-; then echo ssh %s ok; else echo ssh %s fail; fi\n", banner, p, p, p)
		}
		b.WriteString(") &\n")
	}
	b.WriteString("wait\n")
	for _, n := range names {
		fmt.Fprintf(&b, "a=$(getent hosts %s | awk '{print $1; exit}'); echo resolve %s ${a:--}\n", n, n)
	}
	return b.String()
}

// bannerBound is how long, in seconds, the control node waits for a
// peer's SSH banner: half the session's bound, so a peer that never
// answers is a "fail" in the node's row and not a lost session, between
// 3 s and 15 s (sshd re-execs per connection: seconds on a loaded TCG
// guest).
func bannerBound(session time.Duration) int {
	return min(max(int(session/time.Second)/2, 3), 15)
}

// probeResult is one node's parsed probe output.
type probeResult struct {
	node    string
	reach   map[string]bool
	ssh     map[string]bool
	resolve map[string]string
	clock   ClockReading
	peers   []checkPeer
	want    map[string]string
}

func (c *checkCmd) probe(env *tool.Env, a *access, self checkPeer, peers []checkPeer, want map[string]string, control bool) (*probeResult, error) {
	t, err := a.target(env, self.name)
	if err != nil {
		return nil, err
	}
	var addrs []string
	for _, p := range peers {
		if p != self {
			addrs = append(addrs, p.addr)
		}
	}
	names := []string{}
	for n := range want {
		names = append(names, n)
	}
	slices.Sort(names)
	argv, err := guest.ExecArgv(t, []string{"sh", "-c", probeScript(addrs, names, control, bannerBound(c.Timeout))})
	if err != nil {
		return nil, err
	}
	var out, errb bytes.Buffer
	var code int
	err = c.session(env.Ctx, func(ctx context.Context) (err error) {
		code, err = guest.Run(ctx, argv, guest.Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
		return err
	})
	if errors.As(err, new(noAnswerError)) {
		return nil, err
	}
	if err != nil || code != 0 {
		return nil, fmt.Errorf("probe exited %d: %v %s", code, err, strings.TrimSpace(errb.String()))
	}
	r, err := parseProbe(self.name, out.Bytes())
	if err != nil {
		return nil, err
	}
	r.peers, r.want = peers, want
	err = c.session(env.Ctx, func(ctx context.Context) (err error) {
		r.clock, err = measureClock(ctx, t, c.MaxSkew)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("clock: %v", err)
	}
	return r, nil
}

// parseProbe reads probeScript's output; a line it does not know is an error.
func parseProbe(node string, out []byte) (*probeResult, error) {
	r := &probeResult{node: node, reach: map[string]bool{}, ssh: map[string]bool{}, resolve: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 3 && f[0] == "reach":
			r.reach[f[1]] = f[2] == "ok"
		case len(f) == 3 && f[0] == "ssh":
			r.ssh[f[1]] = f[2] == "ok"
		case len(f) == 3 && f[0] == "resolve":
			r.resolve[f[1]] = strings.TrimPrefix(f[2], "-")
		default:
			return nil, fmt.Errorf("probe on %s printed %q", node, sc.Text())
		}
	}
	return r, nil
}

func (r *probeResult) mergeInto(d *CheckDoc) {
	for _, p := range r.peers {
		if p.name == r.node {
			continue
		}
		d.Reach = append(d.Reach, CheckPair{r.node, p.name, r.reach[p.addr]})
		if ok, probed := r.ssh[p.addr]; probed {
			d.SSH = append(d.SSH, CheckPair{r.node, p.name, ok})
		}
	}
	for n, addr := range r.want {
		got := r.resolve[n]
		d.Resolve = append(d.Resolve, CheckResolve{On: r.node, Name: n, Want: addr, Got: got, OK: got == addr})
	}
	d.Clock = append(d.Clock, CheckClock{Node: r.node, ClockReading: r.clock})
}

func (d *CheckDoc) sort() {
	pair := func(a, b CheckPair) int { return strings.Compare(a.From+"\x00"+a.To, b.From+"\x00"+b.To) }
	slices.SortFunc(d.Reach, pair)
	slices.SortFunc(d.SSH, pair)
	slices.SortFunc(d.Resolve, func(a, b CheckResolve) int { return strings.Compare(a.On+"\x00"+a.Name, b.On+"\x00"+b.Name) })
	slices.SortFunc(d.Clock, func(a, b CheckClock) int { return strings.Compare(a.Node, b.Node) })
	slices.SortFunc(d.Errors, func(a, b CheckError) int { return strings.Compare(a.Node, b.Node) })
}

func (d *CheckDoc) ok() bool {
	if len(d.Errors) > 0 {
		return false
	}
	for _, p := range append(slices.Clone(d.Reach), d.SSH...) {
		if !p.OK {
			return false
		}
	}
	for _, r := range d.Resolve {
		if !r.OK {
			return false
		}
	}
	for _, c := range d.Clock {
		if !c.OK {
			return false
		}
	}
	return true
}

// RenderText implements tool.TextRenderer: the reachability matrix (row:
// from, column: to; "ok", "--" cut, "?" not probed), then every failure.
func (d CheckDoc) RenderText(w io.Writer) error {
	reach := map[string]bool{}
	probed := map[string]bool{}
	for _, p := range d.Reach {
		reach[p.From+" "+p.To], probed[p.From+" "+p.To] = p.OK, true
	}
	width := len("from\\to") + 1
	for _, n := range d.Nodes {
		width = max(width, len(n)+2)
	}
	fmt.Fprintf(w, "%-*s", width, "from\\to")
	for _, n := range d.Nodes {
		fmt.Fprintf(w, "%-*s", width, n)
	}
	fmt.Fprintln(w)
	for _, a := range d.Nodes {
		fmt.Fprintf(w, "%-*s", width, a)
		for _, b := range d.Nodes {
			cell := "?"
			switch {
			case a == b:
				cell = "."
			case probed[a+" "+b] && reach[a+" "+b]:
				cell = "ok"
			case probed[a+" "+b]:
				cell = "--"
			}
			fmt.Fprintf(w, "%-*s", width, cell)
		}
		fmt.Fprintln(w)
	}
	for _, p := range d.SSH {
		if !p.OK {
			fmt.Fprintf(w, "ssh %s -> %s: no SSH banner over the private network\n", p.From, p.To)
		}
	}
	for _, r := range d.Resolve {
		if !r.OK {
			fmt.Fprintf(w, "resolve %s on %s: got %q, want %s\n", r.Name, r.On, r.Got, r.Want)
		}
	}
	for _, c := range d.Clock {
		if !c.OK {
			fmt.Fprintf(w, "clock %s: %+.1f ms (±%.1f) from the host\n", c.Node, c.SkewMS, c.UncertaintyMS)
		}
	}
	for _, e := range d.Errors {
		fmt.Fprintf(w, "%s: %s\n", e.Node, e.Error)
	}
	verdict := map[bool]string{true: "all checks passed", false: "CHECK FAILED"}[d.OK]
	_, err := fmt.Fprintln(w, verdict)
	return err
}
