package snapshot

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"barn.dev/lib/disk"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/safefile"
	"barn.dev/lib/state"
)

// Delete removes snapshot name by its record: the tag from every image
// that is still the file the snapshot tagged (a running node's over QMP,
// a stopped node's with qemu-img), the copies that are still Barn's, then
// the record. It also rolls back a save that was interrupted (resuming
// the nodes it paused) and finishes an interrupted delete; an interrupted
// restore it refuses (snapshot_interrupted: restore --force). kept names
// files it left because they are not the ones it recorded.
func (e *Engine) Delete(ctx context.Context, name string) (kept []string, err error) {
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
	lock, names, err := e.lock(ctx, applied(e.Root, r))
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	// Read again under the lock: a restore or save that held it may have
	// changed or removed the record since.
	if r, err = Read(e.Root.Dir, name); err != nil || r == nil {
		if err == nil {
			err = notFound(name)
		}
		return nil, err
	}
	if r.State == Restoring {
		// Half restored: deleting it would resume a mix of the snapshot
		// and the lab, and drop the only way to finish the restore.
		return nil, interrupted(r)
	}
	ns, err := e.committed(names)
	if err != nil {
		return nil, err
	}
	nodes := nodeMap(ns)
	if r.State == Saving {
		return nil, e.rollback(ctx, r, nodes)
	}
	if err := e.resume(ctx, r, nodes); err != nil {
		return nil, err
	}
	return e.remove(ctx, r, nodes)
}

// applied is the nodes of r that are still applied (a node destroyed
// since has no images left to untag; its copies go with the record).
func applied(root *state.Root, r *Record) []string {
	d, err := root.ReadDeployment()
	out := []string{}
	for _, sn := range r.Nodes {
		if err == nil && d != nil && d.Spec.Node(sn.Node) != nil {
			out = append(out, sn.Node)
		}
	}
	return out
}

// rollback undoes an interrupted or failed save: paused nodes resumed,
// tags, copies and record removed.
func (e *Engine) rollback(ctx context.Context, r *Record, nodes map[string]*state.Node) error {
	if err := e.resume(ctx, r, nodes); err != nil {
		return err
	}
	_, err := e.remove(ctx, r, nodes)
	return err
}

// remove marks r deleting, untags each node's images, removes the copies
// and the record, and finally the emptied directory.
func (e *Engine) remove(ctx context.Context, r *Record, nodes map[string]*state.Node) ([]string, error) {
	if r.State != Saving {
		r.State = Deleting
	}
	for i := range r.Nodes {
		r.Nodes[i].Done = false
	}
	if err := e.write(r); err != nil {
		return nil, err
	}
	e.step("journal", "")
	var kept []string
	for i := range r.Nodes {
		sn := &r.Nodes[i]
		if err := e.untag(ctx, r, sn, nodes[sn.Node]); err != nil {
			return nil, err
		}
		for _, k := range []func() (string, error){
			func() (string, error) { return removeOwn(e.Root.Dir, r.Name, sn.NVRAM, sn.NVRAMID) },
			func() (string, error) { return removeOwn(e.Root.Dir, r.Name, sn.StateCopy, sn.StateID) },
		} {
			why, err := k()
			if err != nil {
				return nil, err
			}
			if why != "" {
				kept = append(kept, why)
			}
		}
		sn.Done = true
		if err := e.write(r); err != nil {
			return nil, err
		}
		e.step("deleted", sn.Node)
	}
	if err := safefile.Remove(recordPath(e.Root.Dir, r.Name)); err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "removing the record of snapshot %s", r.Name)
	}
	if len(kept) == 0 {
		if err := os.Remove(Dir(e.Root.Dir, r.Name)); err != nil && !os.IsNotExist(err) {
			kept = append(kept, Dir(e.Root.Dir, r.Name)+": "+err.Error())
		}
	}
	_ = os.Remove(filepath.Join(e.Root.Dir, DirName)) // only when empty
	return kept, nil
}

// untag removes the snapshot's tag from the images of sn that are still
// the files it tagged (by identity: a persistent disk reattached to a
// recreated node is the same file): over QMP while the node runs (QEMU
// holds them; the device is the image's current block node), else with
// qemu-img. Images gone with a destroyed node took their tags with them;
// its persistent disks in the retained store are untagged there.
func (e *Engine) untag(ctx context.Context, r *Record, sn *Node, n *state.Node) error {
	if n == nil {
		return e.untagRetained(ctx, r, sn)
	}
	current := map[string]string{} // path → current block node
	for _, im := range images(n) {
		current[im.Path] = im.Device
	}
	var own []Image
	for _, im := range sn.Images {
		if dev, ok := current[im.Path]; ok && imageDiffers(im) == "" {
			im.Device = dev
			own = append(own, im)
		}
	}
	if len(own) == 0 {
		return nil
	}
	up, err := running(ctx, n)
	if err != nil {
		return err
	}
	if up {
		cp := *sn
		cp.Images = own
		return job(ctx, n, "snapshot-delete", r.Name, cp)
	}
	for _, im := range own {
		if err := e.Disk.DeleteSnapshot(ctx, im.Path, Tag(r.Name)); err != nil {
			return err
		}
	}
	return nil
}

// untagRetained removes the snapshot's tag from the persistent disks of
// sn's node, destroyed since, that sit in the retained store
// (<Dir>/disks/<node>/<disk>/disk.qcow2, its marker usable: not lent out),
// each only while it is the file the snapshot tagged (by identity). A
// store it cannot read is left alone. Without this a snapshot deleted
// while its node was gone left a tag no record names in the disk a
// recreate lends back.
func (e *Engine) untagRetained(ctx context.Context, r *Record, sn *Node) error {
	for _, im := range sn.Images {
		dir := e.Root.RetainedDiskDir(sn.Node, strings.TrimSuffix(filepath.Base(im.Path), state.DataDiskSuffix))
		if own, err := disk.ReadRetained(dir); err != nil || own == nil {
			continue
		}
		im.Path = filepath.Join(dir, disk.RetainedDiskFile)
		if imageDiffers(im) != "" {
			continue
		}
		if err := e.Disk.DeleteSnapshot(ctx, im.Path, Tag(r.Name)); err != nil {
			return err
		}
	}
	return nil
}
