package snapshot

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"barn.dev/lib/disk"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/state"
)

// Engine runs snapshot transactions on one state root. Every transaction
// holds the deployment lock and the locks of the snapshot's nodes.
//
// Crash convergence (each step below is a Hook step, "snapshot-<step>"):
//   - save: record written (journal), each node paused, each node saved,
//     each node resumed, complete. Interrupted before complete, the
//     record says saving: `snapshot delete NAME` rolls it back (removes
//     the tag from every image holding it, resumes the nodes it paused,
//     removes the copies and the record), so the lab is as it was.
//   - restore: record marked restoring, nodes paused, each node loaded,
//     resumed, complete. Interrupted, `snapshot restore NAME --force`
//     loads every node again: the lab ends fully restored, never mixed.
//   - delete: record marked deleting, each node's tags removed, copies
//     removed, record removed. Interrupted, `snapshot delete NAME` goes on.
type Engine struct {
	Root    *state.Root
	Disk    disk.Tool
	Hook    func(step, node string) // crash injection in tests; nil in production
	Log     io.Writer
	Command string // recorded as the lock holder's command
	Waiting func(state.LockHolder)
	Now     func() time.Time
	// FreeBytes returns the bytes available to Barn under dir; nil means
	// statfs. Tests inject a full disk.
	FreeBytes func(dir string) (int64, error)

	mu sync.Mutex // serialises record writes of the per-node steps run at once
}

// eachNode runs fn for every node of ns at once and returns the error of
// the first node (in ns's order) that failed, after all have returned.
// Each node's snapshot job runs in its own QEMU (or qemu-img on its own
// images), so a lab saves and restores in the time of its slowest node,
// not the sum; the lab stays paused for that time only.
func (e *Engine) eachNode(ns []*state.Node, fn func(i int, n *state.Node) error) error {
	errs := make([]error, len(ns))
	var wg sync.WaitGroup
	for i, n := range ns {
		wg.Go(func() { errs[i] = fn(i, n) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			for _, other := range errs[i+1:] {
				if other != nil {
					e.logf("also: %v", other)
				}
			}
			return err
		}
	}
	return nil
}

func (e *Engine) now() time.Time {
	if e.Now != nil {
		return e.Now().UTC()
	}
	return time.Now().UTC()
}

func (e *Engine) step(step, node string) {
	if e.Hook != nil {
		e.Hook("snapshot-"+step, node)
	}
}

func (e *Engine) logf(format string, args ...any) {
	if e.Log != nil {
		fmt.Fprintf(e.Log, format+"\n", args...)
	}
}

func (e *Engine) write(r *Record) error { return write(e.Root.Dir, r, e.now()) }

// lock takes the deployment lock and the locks of nodes (all applied
// nodes when nodes is nil) and returns the selection. Without an applied
// deployment only an empty selection (a delete after purge) is allowed.
func (e *Engine) lock(ctx context.Context, nodes []string) (state.Lock, []string, error) {
	lock, err := e.Root.LockDeployment(ctx, e.Command, true, e.Waiting)
	if err != nil {
		return nil, nil, err
	}
	d, err := e.Root.ReadDeployment()
	if err == nil && d == nil && (nodes == nil || len(nodes) > 0) {
		err = exitcode.New(exitcode.Conflict, "no deployment is applied").WithReason("no_deployment").WithNext("barn-node apply")
	}
	if err != nil {
		lock.Unlock()
		return nil, nil, err
	}
	if nodes == nil {
		nodes = d.Spec.NodeNames()
	}
	for _, n := range nodes {
		if d.Spec.Node(n) == nil {
			lock.Unlock()
			return nil, nil, exitcode.New(exitcode.Usage, "unknown node %q; applied nodes: %v", n, d.Spec.NodeNames()).WithReason("unknown_node")
		}
	}
	sort.Strings(nodes)
	all, err := e.Root.WithNodeLocks(ctx, lock, e.Command, true, nodes)
	if err != nil {
		return nil, nil, err
	}
	return all, nodes, nil
}

// committed reads the committed state of every node; a node never created
// is a conflict.
func (e *Engine) committed(names []string) ([]*state.Node, error) {
	var out []*state.Node
	for _, name := range names {
		docs, err := e.Root.ReadNodeDocuments(name)
		if err != nil {
			return nil, err
		}
		if docs.State == nil {
			return nil, exitcode.New(exitcode.Conflict, "node %s has no committed state", name).
				WithReason("node_not_created").WithNext("barn-node apply")
		}
		out = append(out, docs.State)
	}
	return out, nil
}

// images are the writable qcow2 images of n with their QMP node names (the
// names lib/qemu gives them) and recorded identities.
func images(n *state.Node) []Image {
	out := []Image{{Device: "root", Path: n.RootDisk, ID: n.Files[filepath.Base(n.RootDisk)]}}
	for i, d := range n.DataDisks {
		out = append(out, Image{Device: fmt.Sprintf("disk%d", i), Path: d.Path, ID: n.Files[filepath.Base(d.Path)]})
	}
	return out
}

// notFound is the error for a snapshot name without a record.
func notFound(name string) error {
	return exitcode.New(exitcode.Usage, "no snapshot %q", name).WithReason("snapshot_not_found").WithNext("barn-node snapshot list")
}

// interrupted is the refusal of an operation on a record another,
// interrupted operation left behind.
func interrupted(r *Record) error {
	next := "barn-node snapshot delete " + r.Name
	if r.State == Restoring {
		next = "barn-node snapshot restore " + r.Name + " --force"
	}
	return exitcode.New(exitcode.Conflict, "snapshot %s: an interrupted operation left it %s", r.Name, r.State).
		WithReason("snapshot_interrupted").WithNext(next)
}

// Next is the command that converges r, "" for a complete record.
func Next(r *Record) string {
	if r.State == Complete {
		return ""
	}
	return exitcode.As(interrupted(r)).Next
}

// nodeMap indexes committed states by name.
func nodeMap(ns []*state.Node) map[string]*state.Node {
	m := map[string]*state.Node{}
	for _, n := range ns {
		m[n.Node] = n
	}
	return m
}

// resume continues every node r.Paused names (QMP cont) and records each.
// A node no longer running (stopped, crashed) is dropped from the list.
func (e *Engine) resume(ctx context.Context, r *Record, nodes map[string]*state.Node) error {
	for len(r.Paused) > 0 {
		name := r.Paused[0]
		if n := nodes[name]; n != nil && n.Phase == state.Running {
			if err := command(ctx, n, "cont", nil); err != nil {
				return err
			}
		}
		r.Paused = r.Paused[1:]
		if err := e.write(r); err != nil {
			return err
		}
		e.step("resumed", name)
	}
	return nil
}

// pause stops every node of ns (QMP stop), recording each in r.Paused
// before it is stopped, so a crash leaves no paused node unrecorded.
func (e *Engine) pause(ctx context.Context, r *Record, ns []*state.Node) error {
	for _, n := range ns {
		if !contains(r.Paused, n.Node) {
			r.Paused = append(r.Paused, n.Node)
			if err := e.write(r); err != nil {
				return err
			}
		}
		if err := command(ctx, n, "stop", nil); err != nil {
			return err
		}
		e.step("paused", n.Node)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// imageDiffers says why the image im is no longer the file the snapshot
// tagged ("" when it is).
func imageDiffers(im Image) string {
	why, err := im.ID.Differs(im.Path)
	if err != nil {
		return err.Error()
	}
	return why
}

// withNext is err with the next: hint next (an error without a class is
// a runtime error).
func withNext(err error, next string) error {
	if e := exitcode.As(err); e != nil {
		return e.WithNext(next)
	}
	return &exitcode.Error{Class: exitcode.Runtime, Message: err.Error(), Next: next, Err: err}
}
