package nodedir

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/fileid"
	"barn.dev/lib/state"
)

// RecordSerialLog makes sure the serial console file QEMU is about to
// open (nodes/<node>/serial.log, -serial file:) is one Barn created and
// recorded, so destroy can delete it by that record. QEMU opens it with
// O_CREAT|O_TRUNC, which keeps the inode: Barn creates it first (never
// replacing anything) and records its identity in n.Files and its path in
// n.SerialLog, or finds the one it recorded. An empty 0600 file of this
// user's with one link (what a start killed between creating and
// recording it leaves) is taken and recorded: truncating it loses
// nothing. Any other file at that name is a conflict (reason
// unexpected_files): QEMU would truncate it. The caller writes n.
func (s *Store) RecordSerialLog(n *state.Node) error {
	p := s.Root.NodeFile(n.Node, state.SerialLogName)
	if id, ok := n.Files[state.SerialLogName]; ok {
		why, err := id.Differs(p)
		switch {
		case err == nil && why == "":
			n.SerialLog = p
			return nil
		case err == nil:
			return serialLogTaken(n.Node, p, "not the file Barn created: "+why)
		case !fileid.Missing(err):
			return exitcode.Wrap(exitcode.Runtime, err, "checking %s", p)
		}
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, state.FileMode)
	switch {
	case errors.Is(err, fs.ErrExist) && emptyOwnFile(p):
		// Barn's own from a start killed between creating it and
		// recording it: empty, so QEMU's truncation loses nothing.
	case errors.Is(err, fs.ErrExist):
		return serialLogTaken(n.Node, p, "a file Barn did not create")
	case err != nil:
		return exitcode.Wrap(exitcode.Runtime, err, "creating %s", p)
	default:
		if err := f.Close(); err != nil {
			return exitcode.Wrap(exitcode.Runtime, err, "creating %s", p)
		}
	}
	id, err := fileid.Of(p)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "recording %s", p)
	}
	if n.Files == nil {
		n.Files = map[string]fileid.ID{}
	}
	n.Files[state.SerialLogName] = id
	n.SerialLog = p
	return nil
}

// emptyOwnFile reports whether p is an empty regular file with one link,
// owned by this user and not accessible to others (mode 0600 or
// stricter), as RecordSerialLog creates it; a symlink is never followed.
func emptyOwnFile(p string) bool {
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != 0 || fi.Mode().Perm()&0o077 != 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Nlink == 1 && int(st.Uid) == os.Geteuid()
}

func serialLogTaken(node, p, why string) error {
	return exitcode.New(exitcode.Conflict, "%s: %s is %s; not starting QEMU, which would truncate it", node, p, why).
		WithReason("unexpected_files").WithNext("move " + p + " away, then barn-node start " + node)
}
