package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/guest"
	"barn.dev/lib/human"
	"barn.dev/lib/state"
	"barn.dev/lib/tool"
)

// timeCmd groups the guest clock commands. Guests drift: a TCG guest's
// clock runs on emulated time, and a guest the host paused (barn-node
// pause, a suspended laptop) stands still meanwhile; without internet in
// the guest, nothing corrects it. etcd and Patroni read wall clocks for
// leases and elections, so a skewed node misbehaves in ways no test of
// Pigsty's own should have to explain.
type timeCmd struct {
	Status timeStatusCmd `cmd:"" help:"Measure each running guest's clock against the host's (round trip compensated); exit 1 when one is beyond --max-skew."`
	Sync   timeSyncCmd   `cmd:"" help:"Step each running guest's system clock to the host's over the management connection (no internet needed), then measure again."`
}

// timeFlags are shared by status and sync.
type timeFlags struct {
	Nodes []string `arg:"" optional:"" name:"node" predictor:"node" help:"Nodes (default: every running committed node)."`
	clockFlags
}

// clockFlags are the flags of every command that measures guest clocks
// (time status, time sync, check).
type clockFlags struct {
	MaxSkew time.Duration `name:"max-skew" default:"1s" help:"Largest clock difference to the host accepted (half the measuring round trip is granted as uncertainty)."`
	Timeout time.Duration `default:"30s" help:"Bound on each SSH session with a node (time sync makes three, check two; a paused or cut-off node fails within one)."`
}

// TimeDoc is barn.time/v1, printed by time status and time sync.
type TimeDoc struct {
	Schema    string     `json:"schema"`
	Command   string     `json:"command"` // status or sync
	OK        bool       `json:"ok"`      // every node measured and within max_skew_ms
	MaxSkewMS float64    `json:"max_skew_ms"`
	Nodes     []TimeNode `json:"nodes"` // sorted by node
}

// TimeNode is one guest's clock. For sync, before_ms is the skew that was
// corrected and the reading the one measured after.
type TimeNode struct {
	Node string `json:"node"`
	ClockReading
	BeforeMS *float64 `json:"before_ms,omitempty"`
	Error    string   `json:"error,omitempty"` // the node could not be measured or set
}

// ClockReading is one measurement of a guest's clock against the host's,
// as time status, time sync, check and the warning after start report
// it: skew is the guest minus the host (positive: ahead) at the measuring
// round trip's middle, uncertainty half that round trip, all in
// milliseconds; ok when the skew is within the command's maximum.
type ClockReading struct {
	SkewMS        float64       `json:"skew_ms"`
	UncertaintyMS float64       `json:"uncertainty_ms"`
	RTTMS         float64       `json:"rtt_ms"`
	OK            bool          `json:"ok"`
	skew          time.Duration // SkewMS unrounded, the step time sync makes
}

// measureClock is the one clock measurement: guest.ReadClock over t's
// management connection, judged against maxSkew (guest.ClockSample.Within,
// which grants the uncertainty). It fails as ReadClock does.
func measureClock(ctx context.Context, t guest.Target, maxSkew time.Duration) (ClockReading, error) {
	s, err := guest.ReadClock(ctx, t)
	if err != nil {
		return ClockReading{}, err
	}
	return ClockReading{SkewMS: guest.Milliseconds(s.Skew()), UncertaintyMS: guest.Milliseconds(s.Uncertainty()),
		RTTMS: guest.Milliseconds(s.RTT()), OK: s.Within(maxSkew), skew: s.Skew()}, nil
}

type timeStatusCmd struct{ timeFlags }

type timeSyncCmd struct{ timeFlags }

func (c *timeStatusCmd) Run(env *tool.Env) error { return c.run(env, "status") }

func (c *timeSyncCmd) Run(env *tool.Env) error { return c.run(env, "sync") }

// run measures (and for sync, steps then re-measures) every selected
// node in parallel and emits barn.time/v1.
func (f *timeFlags) run(env *tool.Env, command string) error {
	a, err := loadAccess(env)
	if err != nil {
		return err
	}
	names, err := f.selected(a)
	if err != nil {
		return err
	}
	doc := TimeDoc{Schema: "barn.time/v1", Command: command, MaxSkewMS: guest.Milliseconds(f.MaxSkew), Nodes: make([]TimeNode, len(names))}
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			doc.Nodes[i] = f.node(env, a, n, command == "sync")
		}()
	}
	wg.Wait()
	doc.OK = !slices.ContainsFunc(doc.Nodes, func(n TimeNode) bool { return !n.OK })
	if err := env.Emit(doc); err != nil {
		return err
	}
	if doc.OK {
		return nil
	}
	return tool.Reported(doc.err())
}

// selected is the named nodes (each must be committed), or every
// committed node recorded running.
func (f *timeFlags) selected(a *access) ([]string, error) {
	if len(f.Nodes) > 0 {
		for _, n := range f.Nodes {
			if _, err := a.resolve(n); err != nil {
				return nil, err
			}
		}
		return slices.Compact(slices.Sorted(slices.Values(f.Nodes))), nil
	}
	var names []string
	for _, n := range a.names {
		if a.nodes[n].Phase == state.Running {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil, exitcode.New(exitcode.Conflict, "no node is running").WithReason("node_not_running").WithNext("barn-node start")
	}
	return names, nil
}

// node measures one node; with set it steps the clock by the measured
// skew and measures again: three SSH sessions, each bounded by --timeout
// on its own (a login into a guest just booted under TCG on a loaded host
// can take most of 30 s, so one bound over all three failed good syncs).
func (f *timeFlags) node(env *tool.Env, a *access, name string, set bool) TimeNode {
	r := TimeNode{Node: name}
	t, err := a.target(env, name)
	if err != nil {
		r.Error = exitcode.As(err).Message
		return r
	}
	measure := func() (c ClockReading, err error) {
		err = f.session(env.Ctx, func(ctx context.Context) (err error) {
			c, err = measureClock(ctx, t, f.MaxSkew)
			return err
		})
		return c, err
	}
	c, err := measure()
	if err == nil && set {
		before := c.SkewMS
		r.BeforeMS = &before
		if err = f.session(env.Ctx, func(ctx context.Context) error { return guest.SetClock(ctx, t, c.skew) }); err == nil {
			c, err = measure()
		}
	}
	if err != nil {
		r.Error = exitcode.As(err).Message
		return r
	}
	r.ClockReading = c
	return r
}

// session runs one SSH session with a node (fn), bounded by --timeout; a
// session the bound cut short fails as noAnswerError.
func (f *clockFlags) session(parent context.Context, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(parent, f.Timeout)
	defer cancel()
	err := fn(ctx)
	if err != nil && ctx.Err() != nil && parent.Err() == nil {
		return noAnswerError{f.Timeout}
	}
	return err
}

// noAnswerError is a session with a node that --timeout cut short.
type noAnswerError struct{ within time.Duration }

func (e noAnswerError) Error() string {
	return fmt.Sprintf("no answer within %s (paused, or its management link is down)", e.within)
}

// err is the failed document's error: clock_skewed (runtime) naming the
// sync command for the skewed nodes, else the first node that failed.
func (d TimeDoc) err() error {
	var skewed, failed []string
	for _, n := range d.Nodes {
		switch {
		case n.Error != "":
			failed = append(failed, n.Node+": "+n.Error)
		case !n.OK:
			skewed = append(skewed, n.Node)
		}
	}
	if len(failed) > 0 {
		return exitcode.New(exitcode.Runtime, "clock not measured on %s", strings.Join(failed, "; ")).WithReason("clock_unmeasured").WithNext("barn-node status")
	}
	return exitcode.New(exitcode.Runtime, "clock of %s beyond %.0f ms from the host", strings.Join(skewed, ", "), d.MaxSkewMS).
		WithReason("clock_skewed").WithNext("barn-node time sync " + strings.Join(skewed, " "))
}

// RenderText implements tool.TextRenderer: one row per node (NODE, SKEW
// with its uncertainty, RTT, and for sync BEFORE), then the verdict.
func (d TimeDoc) RenderText(w io.Writer) error {
	tw := human.Table(w)
	head := "NODE\tSKEW\tRTT\tSTATUS"
	if d.Command == "sync" {
		head = "NODE\tBEFORE\tSKEW\tRTT\tSTATUS"
	}
	fmt.Fprintln(tw, head)
	for _, n := range d.Nodes {
		before := ""
		if d.Command == "sync" {
			before = "-\t"
			if n.BeforeMS != nil {
				before = fmt.Sprintf("%+.1f ms\t", *n.BeforeMS)
			}
		}
		status := map[bool]string{true: "ok", false: "SKEWED"}[n.OK]
		if n.Error != "" {
			fmt.Fprintf(tw, "%s\t%s-\t-\tERROR: %s\n", n.Node, before, n.Error)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s%+.1f ms ±%.1f\t%.1f ms\t%s\n", n.Node, before, n.SkewMS, n.UncertaintyMS, n.RTTMS, status)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	verdict := fmt.Sprintf("every clock within %.0f ms of the host", d.MaxSkewMS)
	if !d.OK {
		verdict = fmt.Sprintf("CLOCKS NOT WITHIN %.0f ms", d.MaxSkewMS)
	}
	_, err := fmt.Fprintln(w, verdict)
	return err
}
