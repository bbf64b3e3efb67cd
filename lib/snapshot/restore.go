package snapshot

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/qemu"
	"barn.dev/lib/state"
	"barn.dev/lib/vmrecord"
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
	// Read again under the lock: a delete that held it may have removed
	// the record, or a save or delete left it interrupted.
	if r, err = Read(e.Root.Dir, name); err != nil || r == nil {
		if err == nil {
			err = notFound(name)
		}
		return nil, err
	}
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

// matches refuses a restore onto nodes that are not the ones saved, in
// the wrong run state, or (memory) running another QEMU layout.
func (e *Engine) matches(ctx context.Context, r *Record, ns []*state.Node) error {
	for i, n := range ns {
		sn := r.Nodes[i]
		if n.VMUUID != sn.VMUUID {
			return exitcode.New(exitcode.Conflict, "node %s was recreated after snapshot %s was taken (VM %s, not %s): its images no longer hold the snapshot", n.Node, r.Name, n.VMUUID, sn.VMUUID).
				WithReason("snapshot_stale").WithNext("barn-node snapshot delete " + r.Name)
		}
		if n.SpecHash != sn.SpecHash || n.Generation != sn.Generation {
			return specRefusal(r, n, sn)
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
			if err := launchMatches(ctx, r.Name, n, sn.Launch); err != nil {
				return err
			}
		}
	}
	return nil
}

// specRefusal refuses node n, whose definition is not snapshot sn's: a
// resize back helps, unless the snapshot holds memory of hot-plugged
// devices, which no resize re-creates (memory is never unplugged, and a
// decrease restarts the node).
func specRefusal(r *Record, n *state.Node, sn Node) error {
	msg := fmt.Sprintf("node %s: applied spec %s (generation %d) is not the snapshot's %s (generation %d)", n.Node, n.SpecHash, n.Generation, sn.SpecHash, sn.Generation)
	if r.Memory && !sn.Launch.Relaunchable {
		return exitcode.New(exitcode.Conflict, "%s, and its memory was saved from a QEMU with hot-plugged vCPUs or memory, which no resize re-creates", msg).
			WithReason("snapshot_spec_mismatch").WithNext("barn-node snapshot delete " + r.Name + "   # it can no longer be loaded")
	}
	return exitcode.New(exitcode.Conflict, "%s", msg).
		WithReason("snapshot_spec_mismatch").WithNext("barn-node resize " + n.Node + " back to the definition snapshot " + r.Name + " was taken with (node spec hash " + sn.SpecHash + "), then barn-node snapshot restore " + r.Name)
}

// launchMatches refuses loading a memory snapshot into a QEMU whose
// vCPUs, memory or hot-plug headroom (what QEMU reports now, and the
// headroom its command line was recorded with) differ from the saving
// QEMU's: QEMU's snapshot-load would fail inside the restore. A restart
// relaunches from the definition, which is the snapshot's (checked
// before), so it helps when the snapshot's layout is a launch's.
func launchMatches(ctx context.Context, snap string, n *state.Node, l *Launch) error {
	now, err := launchOf(ctx, n)
	if err != nil {
		return err
	}
	if now.Layout.Equal(l.Layout) && reflect.DeepEqual(now.Headroom, l.Headroom) {
		return nil
	}
	msg := fmt.Sprintf("node %s: its QEMU has other vCPUs, memory or hot-plug headroom (%s) than the one snapshot %s was saved from (%s)", n.Node, describe(now), snap, describe(l))
	if !l.Relaunchable {
		return exitcode.New(exitcode.Conflict, "%s; its hot-plugged devices went with that QEMU, and no restart or resize re-creates them", msg).WithReason("snapshot_layout_mismatch").
			WithNext("barn-node snapshot delete " + snap + "   # it can no longer be loaded")
	}
	// A restart launches the definition's layout, with the headroom this
	// host gives now (qemu.HeadroomFor: its CPUs and memory as barn-node
	// sees them at launch, CPU affinity included).
	if launch := launchHeadroom(n, l); now.Relaunchable && !reflect.DeepEqual(launch, l.Headroom) {
		return exitcode.New(exitcode.Conflict, "%s; a launch on this host now gives %s, so a restart does not re-create it", msg, describeHeadroom(launch)).WithReason("snapshot_layout_mismatch").
			WithNext("barn-node snapshot delete " + snap + "   # or restore it where barn-node sees the CPUs and memory it saw at the save")
	}
	return exitcode.New(exitcode.Conflict, "%s", msg).WithReason("snapshot_layout_mismatch").
		WithNext("barn-node restart " + n.Node + ", then barn-node snapshot restore " + snap)
}

// launchHeadroom is the headroom a launch of n would get on this host now
// (nil when the snapshot's QEMU had none: not a q35 machine).
func launchHeadroom(n *state.Node, l *Launch) *vmrecord.Headroom {
	if l.Headroom == nil {
		return nil
	}
	return qemu.HeadroomFor(n.Spec, qemu.Profile{Machine: "q35", Host: qemu.DetectHostSize()})
}

// describe sums up a launch for a message.
func describe(l *Launch) string {
	return fmt.Sprintf("%d vCPUs (%d hot-plugged), %d MiB at launch, hot-plugged memory %v, %s", len(l.Layout.CPUs), len(l.Layout.HotCPUs), l.Layout.BaseMemory>>20, l.Layout.DIMMs, describeHeadroom(l.Headroom))
}

func describeHeadroom(h *vmrecord.Headroom) string {
	if h == nil {
		return "no headroom"
	}
	return fmt.Sprintf("headroom %d vCPUs, %d MiB", h.MaxCPUs, h.MaxMemoryBytes>>20)
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
