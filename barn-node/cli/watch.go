package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"sync"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/human"
	"barn.dev/lib/lifecycle"
	"barn.dev/lib/tool"
)

// Readiness of one node while watching.
const (
	watchPending  = "SSH pending" // running; the guest has not proven readiness yet
	watchReady    = "ready"       // the guest's ready marker matches this generation
	watchFailed   = "failed"      // readiness failed, or the status audit failed
	watchStopped  = "not running" // nothing to wait for
	watchUnproven = "running"     // running; readiness checks are off (BARN_READINESS=none)

	// watchStrikes is how many refreshes in a row must fail a node's
	// status before the watch calls it failed.
	watchStrikes = 3
)

// WatchDoc is barn.watch/v1: the last status and each node's readiness.
type WatchDoc struct {
	Schema    string            `json:"schema"`
	Status    *lifecycle.Status `json:"status"`
	Readiness map[string]string `json:"readiness"`        // node → ready, SSH pending, failed, not running, running
	Errors    map[string]string `json:"errors,omitempty"` // node → why readiness failed
	ElapsedMS int64             `json:"elapsed_ms"`       // how long the watch took
	TimedOut  bool              `json:"timed_out"`
}

// RenderText prints the status table, then each node's readiness.
func (d WatchDoc) RenderText(w io.Writer) error {
	if d.Status != nil {
		if err := d.Status.RenderText(w); err != nil {
			return err
		}
	}
	tw := human.Table(w)
	for _, n := range sortedKeys(d.Readiness) {
		line := n + "\t" + d.Readiness[n]
		if e := d.Errors[n]; e != "" {
			line += "\t" + e
		}
		fmt.Fprintln(tw, line)
	}
	_ = tw.Flush()
	verdict := "settled"
	if d.TimedOut {
		verdict = "gave up waiting"
	}
	_, err := fmt.Fprintf(w, "%s after %s\n", verdict, human.Duration(time.Duration(d.ElapsedMS)*time.Millisecond))
	return err
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// watch refreshes status every interval until every selected node is
// ready, failed (its readiness failed, or its status on watchStrikes
// refreshes in a row) or not running, or until timeout. Progress (one line per
// change, with the elapsed time) goes to stderr; the final WatchDoc to
// stdout. Exit: 0 when every running node is ready (or unchecked); when
// any failed, the batch class of the failures over the watched nodes
// (exitcode.BatchClass: their own class when all failed alike, else
// partial (5)); runtime (1, reason watch_timeout) on timeout; cancelled
// (130) on SIGINT.
func (c *statusCmd) watch(env *tool.Env, m *lifecycle.Manager) error {
	start := env.Now()
	ctx, cancel := context.WithTimeout(env.Ctx, c.Timeout)
	defer cancel()
	check := env.Getenv(envReadiness) != "none"
	var mu sync.Mutex
	ready := map[string]string{}
	errs := map[string]string{}
	classes := map[string]exitcode.Class{} // failed node → its failure's class
	probing := map[string]bool{}
	strikes := map[string]int{} // node → consecutive refreshes whose status failed it
	shown := map[string]string{}
	var last *lifecycle.Status
	for {
		st, err := m.Status(ctx, c.Nodes)
		if ctx.Err() != nil && (last != nil || st != nil) {
			// The watch's deadline (or ^C) cut this status short: its
			// failures (a QMP query cancelled mid-way) say nothing about
			// the nodes, so the previous status (if any) stands.
			if last == nil {
				last = st
			}
			return c.timedOut(env, last, ready, errs, start, &mu)
		}
		if st == nil {
			return err
		}
		last = st
		failed := strike(strikes, st.Failures)
		mu.Lock()
		for _, n := range st.Nodes {
			f, isFailed := failed[n.Name]
			switch {
			case isFailed:
				ready[n.Name], errs[n.Name], classes[n.Name] = watchFailed, f.Error, f.Class()
			case strikes[n.Name] > 0:
				// not yet a verdict: what the node was stays, and no probe starts
				if ready[n.Name] == "" {
					ready[n.Name] = watchPending
				}
			case n.Runtime != lifecycle.RuntimeRunning:
				ready[n.Name] = watchStopped
			case !check:
				ready[n.Name] = watchUnproven
			case ready[n.Name] == watchReady || ready[n.Name] == watchFailed:
			default:
				ready[n.Name] = watchPending
				if !probing[n.Name] {
					probing[n.Name] = true
					go c.probe(ctx, m, n.Name, &mu, ready, errs, classes)
				}
			}
		}
		settled := true
		for _, n := range st.Nodes {
			r := ready[n.Name]
			if shown[n.Name] != r {
				shown[n.Name] = r
				env.Stderrf("%s: %s (%s)", n.Name, r, human.Duration(env.Now().Sub(start)))
			}
			if r == watchPending || strikes[n.Name] > 0 && r != watchFailed {
				settled = false
			}
		}
		mu.Unlock()
		if settled {
			break
		}
		select {
		case <-ctx.Done():
			return c.timedOut(env, last, ready, errs, start, &mu)
		case <-time.After(c.Interval):
		}
	}
	doc := c.doc(last, ready, errs, env.Now().Sub(start), &mu)
	if len(doc.Errors) > 0 {
		var failed []exitcode.Class
		for _, n := range sortedKeys(doc.Errors) {
			failed = append(failed, classes[n])
		}
		class := exitcode.BatchClass(len(doc.Readiness), failed)
		return emit(env, doc, exitcode.New(class, "%d of %d node(s) failed readiness", len(doc.Errors), len(doc.Readiness)).WithReason("nodes_failed"))
	}
	return emit(env, doc, nil)
}

// strike counts, in strikes (node → refreshes in a row), the nodes this
// refresh's status failed, forgets the others, and returns the failures
// that are verdicts: an integrity failure at once (damaged evidence never
// waits), any other once it came watchStrikes times in a row. A node the
// status audit fails (its QMP silent for the audit's bound, say) fails
// the watch only when the next refreshes fail it too: on a loaded host
// one slow answer is no verdict.
func strike(strikes map[string]int, failures []lifecycle.Failure) map[string]lifecycle.Failure {
	failed := map[string]lifecycle.Failure{}
	for n := range strikes {
		if !slices.ContainsFunc(failures, func(f lifecycle.Failure) bool { return f.Node == n }) {
			delete(strikes, n)
		}
	}
	for _, f := range failures {
		if strikes[f.Node]++; strikes[f.Node] >= watchStrikes || f.Class() == exitcode.Integrity {
			failed[f.Node] = f
		}
	}
	return failed
}

// timedOut ends a watch whose deadline passed (cancelled on ^C): the
// last status with the readiness seen so far, timed_out set.
func (c *statusCmd) timedOut(env *tool.Env, last *lifecycle.Status, ready, errs map[string]string, start time.Time, mu *sync.Mutex) error {
	doc := c.doc(last, ready, errs, env.Now().Sub(start), mu)
	doc.TimedOut = true
	if env.Ctx.Err() != nil {
		return exitcode.New(exitcode.Cancelled, "interrupted while watching")
	}
	return emit(env, doc, exitcode.New(exitcode.Runtime, "not every node was ready after %s", human.Duration(c.Timeout)).
		WithReason("watch_timeout").WithNext("barn-node logs -f NODE"))
}

func (c *statusCmd) doc(st *lifecycle.Status, ready, errs map[string]string, elapsed time.Duration, mu *sync.Mutex) WatchDoc {
	mu.Lock()
	defer mu.Unlock()
	d := WatchDoc{Schema: "barn.watch/v1", Status: st, Readiness: map[string]string{}, Errors: map[string]string{}, ElapsedMS: elapsed.Milliseconds()}
	for k, v := range ready {
		d.Readiness[k] = v
	}
	for k, v := range errs {
		d.Errors[k] = v
	}
	return d
}

// probe waits for one node's guest readiness (the same SSH check apply
// uses) within the watch's deadline.
func (c *statusCmd) probe(ctx context.Context, m *lifecycle.Manager, name string, mu *sync.Mutex, ready, errs map[string]string, classes map[string]exitcode.Class) {
	n, err := m.Root.ReadNode(name)
	if err == nil && n == nil {
		err = exitcode.New(exitcode.Conflict, "no committed state")
	}
	if err == nil {
		g := &guestReadiness{root: m.Root}
		_, _, err = g.WaitReady(ctx, n)
	}
	mu.Lock()
	defer mu.Unlock()
	if ctx.Err() != nil {
		return // the watch ended; the node stays pending
	}
	if err != nil {
		e := exitcode.As(err)
		ready[name], errs[name], classes[name] = watchFailed, e.Message, e.Class
		return
	}
	ready[name] = watchReady
}
