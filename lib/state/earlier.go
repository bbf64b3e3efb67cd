package state

import (
	"fmt"
	"path/filepath"

	"barn.dev/lib/exitcode"
)

// Barn has had no release: documents of its own schemas written by an
// earlier development build, before it recorded the identity of every file
// it creates, are not read at all (no code keeps formats no release
// wrote). They are refused as integrity (7), reason dev_build_format,
// naming the file; the one action that helps is to move the node's
// directory out of the state root (after stopping its QEMU) and create
// the node again. README "State layout" says so.

// earlierNode refuses node state in which a file the node records has no
// identity in files, that records no serial console file (every create
// makes one), whose runtime has no Barn QMP monitor of its own, or whose
// QEMU process tuple lacks the executable's file or the boot id
// (procid.Capture records both).
func (r *Root) earlierNode(path string, n *Node) error {
	if n.Runtime.Directory != "" && n.Runtime.BarnQMP == "" {
		return r.earlier(path, n.Node, "its runtime records no Barn QMP monitor (runtime.barn_qmp)")
	}
	if n.SerialLog == "" {
		return r.earlier(path, n.Node, "it records no serial console file (serial_log)")
	}
	if p := n.Process; p != nil && (p.ExecutableFile == "" || p.Boot == "") {
		return r.earlier(path, n.Node, fmt.Sprintf("its QEMU process %d is recorded without process.executable_file or process.boot", p.PID))
	}
	recorded := []string{n.RootDisk, n.Seed, n.NVRAM, n.SerialLog}
	for _, d := range n.DataDisks {
		recorded = append(recorded, d.Path)
	}
	for _, f := range recorded {
		if f == "" {
			continue
		}
		if _, ok := n.Files[filepath.Base(f)]; !ok {
			return r.earlier(path, n.Node, fmt.Sprintf("it records %s without its file identity", filepath.Base(f)))
		}
	}
	return nil
}

// earlierJournal refuses a prepare journal with a completed artifact that
// records no identity.
func (r *Root) earlierJournal(path string, j *Journal) error {
	for _, a := range j.Completed {
		if a.ID == nil {
			return r.earlier(path, j.Node, fmt.Sprintf("its completed artifact %s records no file identity", filepath.Base(a.Path)))
		}
	}
	return nil
}

// EarlierBuildReason is the reason of a document written by an earlier
// development build of Barn.
const EarlierBuildReason = "dev_build_format"

func (r *Root) earlier(path, node, why string) error {
	dir := r.NodeDir(node)
	return exitcode.New(exitcode.Integrity, "%s was written by an earlier development build of Barn (%s); this Barn does not read it", path, why).
		WithReason(EarlierBuildReason).
		WithNext(fmt.Sprintf("stop %s's QEMU if it runs, move %s out of %s, then plan and apply again", node, dir, r.NodesDir())).
		WithDetail(Problem{File: path, Class: exitcode.Integrity, Message: why})
}
