package snapshot

import (
	"context"
	"os"
	"path/filepath"
	"syscall"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/state"
	"barn.dev/lib/vm"
)

// Save takes snapshot name of nodes (all applied nodes when nil): with
// guest memory when every node runs, disk-only when every node is
// stopped; a lab half running is refused. All or nothing: on a failure
// the partial snapshot is rolled back before Save returns.
func (e *Engine) Save(ctx context.Context, name string, nodes []string) (*Record, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if len(nodes) == 0 {
		nodes = nil // every applied node
	}
	nodes = unique(nodes) // `save s n1 n1` is n1's snapshot, saved once
	lock, names, err := e.lock(ctx, nodes)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	if old, err := Read(e.Root.Dir, name); err != nil || old != nil {
		if old != nil && old.State != Complete {
			return nil, interrupted(old)
		}
		if old != nil {
			err = exitcode.New(exitcode.Conflict, "snapshot %s exists", name).WithReason("snapshot_exists").
				WithNext("barn-node snapshot delete " + name)
		}
		return nil, err
	}
	ns, err := e.committed(names)
	if err != nil {
		return nil, err
	}
	memory, err := e.labRuns(ctx, ns)
	if err != nil {
		return nil, err
	}
	if err := e.checkSpace(ns, memory); err != nil {
		return nil, err
	}
	if err := e.tagsFree(ctx, name, ns); err != nil {
		return nil, err
	}
	r := &Record{Schema: Schema, Name: name, State: Saving, Memory: memory, Paused: []string{}, CreatedAt: e.now()}
	for _, n := range ns {
		sn := Node{Node: n.Node, VMUUID: n.VMUUID, SpecHash: n.SpecHash, Generation: n.Generation, Images: images(n)}
		if memory {
			if sn.Launch, err = launchOf(ctx, n); err != nil {
				return nil, err
			}
		}
		r.Nodes = append(r.Nodes, sn)
	}
	if err := e.write(r); err != nil {
		return nil, err
	}
	e.step("journal", "")
	if err := e.saveNodes(ctx, r, ns); err != nil {
		if rerr := e.rollback(ctx, r, nodeMap(ns)); rerr != nil {
			e.logf("rollback of snapshot %s failed: %v", name, rerr)
			return nil, withNext(err, "barn-node snapshot delete "+name)
		}
		return nil, err
	}
	return r, nil
}

// saveNodes pauses (memory), saves each node, resumes, then completes.
func (e *Engine) saveNodes(ctx context.Context, r *Record, ns []*state.Node) error {
	if r.Memory {
		if err := e.pause(ctx, r, ns); err != nil {
			return err
		}
	}
	if err := e.eachNode(ns, func(i int, n *state.Node) error { return e.saveNode(ctx, r, &r.Nodes[i], n) }); err != nil {
		return err
	}
	if err := e.resume(ctx, r, nodeMap(ns)); err != nil {
		return err
	}
	r.SizeBytes = e.size(ctx, r)
	r.State = Complete // only once every node runs again: a complete record pauses nothing
	if err := e.write(r); err != nil {
		return err
	}
	e.step("complete", "")
	return nil
}

// saveNode saves one node into r.Nodes entry sn. It runs at once with
// the other nodes' saves, so it fills a copy of sn and publishes it into
// the record under e.mu: once its copies exist, and (written) when done.
func (e *Engine) saveNode(ctx context.Context, r *Record, sn *Node, n *state.Node) error {
	e.mu.Lock()
	done := *sn
	e.mu.Unlock()
	var err error
	done.StateCopy = n.Node + ".state.json"
	if done.StateID, err = copyIn(e.Root.Dir, r.Name, done.StateCopy, e.Root.NodeFile(n.Node, state.NodeStateName)); err != nil {
		return err
	}
	if n.NVRAM != "" {
		done.NVRAM, done.NVRAMPath = n.Node+".nvram.fd", n.NVRAM
		if done.NVRAMID, err = copyIn(e.Root.Dir, r.Name, done.NVRAM, n.NVRAM); err != nil {
			return err
		}
	}
	e.mu.Lock()
	*sn = done // the copies are the record's from here on (a rollback removes them)
	e.mu.Unlock()
	if r.Memory {
		err = job(ctx, n, "snapshot-save", r.Name, done)
	} else {
		for _, im := range done.Images {
			if err = e.Disk.CreateSnapshot(ctx, im.Path, Tag(r.Name)); err != nil {
				break
			}
		}
	}
	if err != nil {
		return err
	}
	done.Done = true
	e.mu.Lock()
	*sn = done
	err = e.write(r)
	e.mu.Unlock()
	if err != nil {
		return err
	}
	e.step("saved", n.Node)
	return nil
}

// labRuns is true when every node runs, false when every node is stopped;
// a mix is refused (snapshot_lab_mixed) naming the command that settles it.
func (e *Engine) labRuns(ctx context.Context, ns []*state.Node) (bool, error) {
	var up, down []string
	for _, n := range ns {
		ok, err := running(ctx, n)
		if err != nil {
			return false, err
		}
		if ok {
			up = append(up, n.Node)
		} else {
			down = append(down, n.Node)
		}
	}
	if len(up) > 0 && len(down) > 0 {
		return false, exitcode.New(exitcode.Conflict, "nodes %v run and %v are stopped: a snapshot is of a running or of a stopped lab", up, down).
			WithReason("snapshot_lab_mixed").WithNext("barn-node start " + joinNames(down) + " (or barn-node stop " + joinNames(up) + ")")
	}
	return len(up) > 0, nil
}

// tagsFree refuses a save when an image already holds the snapshot's tag
// that no record of Barn's names (a snapshot directory moved out by
// hand): qemu-img and QEMU would keep that tag, and the new record would
// restore its older contents.
func (e *Engine) tagsFree(ctx context.Context, name string, ns []*state.Node) error {
	for _, n := range ns {
		for _, im := range images(n) {
			has, err := e.Disk.HasSnapshot(ctx, im.Path, Tag(name))
			if err != nil {
				return err
			}
			if has {
				return exitcode.New(exitcode.Conflict, "%s already holds an internal snapshot %s that no snapshot record names", im.Path, Tag(name)).
					WithReason("snapshot_tag_taken").WithNext("barn-node snapshot save " + name + "-2   # or, with " + n.Node + " stopped, remove it: qemu-img snapshot -d " + Tag(name) + " " + im.Path)
			}
		}
	}
	return nil
}

// launchOf reads what the QEMU of running node n has (its layout, over
// its proven QMP monitor) and what its command line allows (the recorded
// headroom).
func launchOf(ctx context.Context, n *state.Node) (*Launch, error) {
	s, err := session(ctx, n, false)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Conflict, err, "node %s is recorded running but its QMP does not prove it", n.Node).
			WithReason("snapshot_node_unproven").WithNext("barn-node status " + n.Node)
	}
	defer s.Close()
	l, err := vm.ReadLayout(s)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "%s: reading its vCPUs and memory over QMP", n.Node).WithReason("qmp_error")
	}
	return &Launch{Layout: l, Headroom: n.Invocation.Headroom, Relaunchable: l.Launched(n.Spec.CPUs, n.Spec.MemoryBytes)}, nil
}

func joinNames(ns []string) string {
	out := ""
	for i, n := range ns {
		if i > 0 {
			out += " "
		}
		out += n
	}
	return out
}

// spaceMargin is kept free beyond a save's estimate.
const spaceMargin = 64 << 20

// checkSpace refuses a save whose estimate does not fit in the free space
// of the state root's file system: guest memory of running nodes (the
// vmstate is at most the memory size), the NVRAM copies at their size (an
// arm64 node's AAVMF variable store is 64 MiB), 1 MiB per node for the
// state copy, and a 64 MiB margin for qcow2 metadata.
func (e *Engine) checkSpace(ns []*state.Node, memory bool) error {
	need := int64(spaceMargin)
	for _, n := range ns {
		if memory {
			need += n.Spec.MemoryBytes
		}
		need += 1 << 20 // the node state copy
		if n.NVRAM != "" {
			fi, err := os.Stat(n.NVRAM)
			if err != nil {
				return exitcode.Wrap(exitcode.Runtime, err, "node %s: reading its NVRAM's size", n.Node)
			}
			need += fi.Size()
		}
	}
	free, err := e.free(e.Root.Dir)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "checking free space under %s", e.Root.Dir)
	}
	if free < need {
		return exitcode.New(exitcode.Resource, "a snapshot needs about %d MiB under %s; %d MiB are free", need>>20, e.Root.Dir, free>>20).
			WithReason("no_space").WithNext("free space under " + e.Root.Dir + " (barn-node snapshot delete of an old snapshot frees its memory state)")
	}
	return nil
}

func (e *Engine) free(dir string) (int64, error) {
	if e.FreeBytes != nil {
		return e.FreeBytes(dir)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// size is the vmstate bytes in the root overlays plus the copies.
func (e *Engine) size(ctx context.Context, r *Record) int64 {
	var total int64
	for _, sn := range r.Nodes {
		if snaps, err := e.Disk.Snapshots(ctx, sn.Images[0].Path); err == nil {
			for _, s := range snaps {
				if s.Name == Tag(r.Name) {
					total += s.VMStateSize
				}
			}
		}
		for _, f := range []string{sn.NVRAM, sn.StateCopy} {
			if f != "" {
				if id, err := statSize(filepath.Join(Dir(e.Root.Dir, r.Name), f)); err == nil {
					total += id
				}
			}
		}
	}
	return total
}

// unique is names without repeats, in their first order (nil stays nil).
func unique(names []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}
