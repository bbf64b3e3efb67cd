package snapshot

import (
	"context"
	"os"
	"path/filepath"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/state"
)

// Restore returns the snapshot's nodes to snapshot name. It is
// destructive (the caller asks first). A memory snapshot needs every node
// running (each is paused, loaded, and all resume together: no reboot); a
// disk-only one needs every node stopped. A node whose committed state is
// not the one the snapshot was taken of (another VM, spec hash,
// generation, or image file) is refused, naming what makes them match.
// An interrupted restore is finished by restoring again.
func (e *Engine) Restore(ctx context.Context, name string) (*Record, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	r, err := Read(e.Root.Dir, name)
	if err != nil || r == nil {
		if err == nil {
			err = notFound(name)
		}
		return nil, err
	}
	var names []string
	for _, sn := range r.Nodes {
		names = append(names, sn.Node)
	}
	if live := applied(e.Root, r); len(live) != len(names) {
		return nil, exitcode.New(exitcode.Conflict, "snapshot %s is of nodes %v; only %v are applied now (a destroyed node took its images)", name, names, live).
			WithReason("snapshot_stale").WithNext("barn-node snapshot delete " + name)
	}
	lock, _, err := e.lock(ctx, names)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	if r.State != Complete && r.State != Restoring {
		return nil, interrupted(r)
	}
	ns, err := e.committed(names)
	if err != nil {
		return nil, err
	}
	if err := e.matches(ctx, r, ns); err != nil {
		return nil, err
	}
	r.State = Restoring
	if err := e.write(r); err != nil {
		return nil, err
	}
	e.step("journal", "")
	if err := e.restoreNodes(ctx, r, ns); err != nil {
		return nil, withNext(err, "barn-node snapshot restore "+name+" --force")
	}
	return r, nil
}

func (e *Engine) restoreNodes(ctx context.Context, r *Record, ns []*state.Node) error {
	if r.Memory {
		if err := e.pause(ctx, r, ns); err != nil {
			return err
		}
	}
	if err := e.eachNode(ns, func(i int, n *state.Node) error { return e.restoreNode(ctx, r, &r.Nodes[i], n) }); err != nil {
		return err
	}
	if err := e.resume(ctx, r, nodeMap(ns)); err != nil {
		return err
	}
	r.State = Complete
	if err := e.write(r); err != nil {
		return err
	}
	e.step("complete", "")
	return nil
}

// restoreNode loads one node: over QMP (snapshot-load; QEMU writes the
// flash contents of the vmstate back to nvram.fd when the node resumes)
// or, stopped, with qemu-img on each image and the NVRAM copy written
// back in place (the node state's nvram.fd stays the same file).
func (e *Engine) restoreNode(ctx context.Context, r *Record, sn *Node, n *state.Node) error {
	if r.Memory {
		if err := job(ctx, n, "snapshot-load", r.Name, *sn); err != nil {
			return err
		}
	} else {
		for _, im := range sn.Images {
			if err := e.Disk.ApplySnapshot(ctx, im.Path, Tag(r.Name)); err != nil {
				return err
			}
		}
		if sn.NVRAM != "" {
			if err := overwrite(sn.NVRAMPath, filepath.Join(Dir(e.Root.Dir, r.Name), sn.NVRAM)); err != nil {
				return err
			}
		}
	}
	e.step("loaded", n.Node)
	return nil
}

// overwrite writes the bytes of src over dst in place (same inode: the
// node state's identity of dst stays true).
func overwrite(dst, src string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "reading %s", src)
	}
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "opening %s", dst)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return exitcode.Wrap(exitcode.Runtime, err, "writing %s", dst)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return exitcode.Wrap(exitcode.Runtime, err, "writing %s", dst)
	}
	return f.Close()
}

// matches refuses a restore onto nodes that are not the ones saved, or in
// the wrong run state.
func (e *Engine) matches(ctx context.Context, r *Record, ns []*state.Node) error {
	for i, n := range ns {
		sn := r.Nodes[i]
		if n.VMUUID != sn.VMUUID {
			return exitcode.New(exitcode.Conflict, "node %s was recreated after snapshot %s was taken (VM %s, not %s): its images no longer hold the snapshot", n.Node, r.Name, n.VMUUID, sn.VMUUID).
				WithReason("snapshot_stale").WithNext("barn-node snapshot delete " + r.Name)
		}
		if n.SpecHash != sn.SpecHash || n.Generation != sn.Generation {
			return exitcode.New(exitcode.Conflict, "node %s: applied spec %s (generation %d) is not the snapshot's %s (generation %d)", n.Node, n.SpecHash, n.Generation, sn.SpecHash, sn.Generation).
				WithReason("snapshot_spec_mismatch").WithNext("barn-node resize " + n.Node + " back to the definition snapshot " + r.Name + " was taken with (node spec hash " + sn.SpecHash + "), then barn-node snapshot restore " + r.Name)
		}
		for _, im := range sn.Images {
			if why := imageDiffers(im); why != "" {
				return exitcode.New(exitcode.Conflict, "node %s: %s is %s", n.Node, im.Path, why).
					WithReason("snapshot_stale").WithNext("barn-node snapshot delete " + r.Name)
			}
		}
		up, err := running(ctx, n)
		if err != nil {
			return err
		}
		if up != r.Memory {
			return phaseRefusal(r, n.Node, up)
		}
		if r.Memory {
			if err := launchMatches(r.Name, n, sn.Launch); err != nil {
				return err
			}
		}
	}
	return nil
}

// launchMatches refuses loading a memory snapshot into a QEMU that may
// have other devices than the one it was saved from: another command
// line (a restart after a hot-plug, a Barn that builds another), or, when
// that QEMU held hot-plugged vCPUs or memory, any other process.
func launchMatches(snap string, n *state.Node, l *Launch) error {
	now := launchOf(n)
	switch {
	case l.HotplugPID != 0 && (now.HotplugPID != l.HotplugPID || now.HotplugStarted != l.HotplugStarted):
		return exitcode.New(exitcode.Conflict, "node %s: snapshot %s holds the memory of QEMU process %d with hot-plugged vCPUs or memory, which is gone; another process cannot load it", n.Node, snap, l.HotplugPID).
			WithReason("snapshot_layout_mismatch").WithNext("barn-node snapshot delete " + snap + "   # save a new one; a snapshot taken after a restart has no hot-plugged devices")
	case now.ArgvHash != l.ArgvHash && n.Hotplug != nil:
		// The snapshot's spec is the node's: a restart launches it with
		// the command line the snapshot was saved from.
		return exitcode.New(exitcode.Conflict, "node %s runs hot-plugged vCPUs or memory that the QEMU snapshot %s was saved from did not have", n.Node, snap).
			WithReason("snapshot_layout_mismatch").WithNext("barn-node restart " + n.Node + ", then barn-node snapshot restore " + snap)
	case now.ArgvHash != l.ArgvHash:
		return exitcode.New(exitcode.Conflict, "node %s: its QEMU was launched from the same definition with another command line than the one snapshot %s was saved from (another Barn, or another host's hot-plug headroom), so its devices may differ", n.Node, snap).
			WithReason("snapshot_layout_mismatch").WithNext("barn-node snapshot delete " + snap + "   # a memory snapshot loads only into the QEMU layout it was saved from")
	}
	return nil
}

func phaseRefusal(r *Record, node string, up bool) error {
	if r.Memory {
		return exitcode.New(exitcode.Conflict, "snapshot %s holds guest memory and node %s is stopped: QEMU loads it into a running node", r.Name, node).
			WithReason("snapshot_phase_mismatch").WithNext("barn-node start " + node + " --no-wait, then barn-node snapshot restore " + r.Name)
	}
	return exitcode.New(exitcode.Conflict, "snapshot %s is disk-only and node %s runs: its images can be reverted only while it is stopped", r.Name, node).
		WithReason("snapshot_phase_mismatch").WithNext("barn-node stop " + node + ", then barn-node snapshot restore " + r.Name)
}

func statSize(path string) (int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
