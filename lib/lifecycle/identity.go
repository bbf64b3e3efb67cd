package lifecycle

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/fileid"
	"barn.dev/lib/state"
)

// identify returns the identity recorded for a new artifact: device,
// inode, birth time and generation (fileid.Of), plus the SHA-256 for the
// seed, whose bytes nothing changes after Barn wrote them (QEMU reads it
// as a read-only CD-ROM).
func identify(kind state.ArtifactKind, path string) (fileid.ID, error) {
	if kind == state.Seed {
		return fileid.OfContent(path)
	}
	return fileid.Of(path)
}

// journaledFiles is the node state's record of the files a create made or
// reattached: each completed artifact's identity by its name in the node
// directory (an artifact without one — a disk reattached under a marker
// from before identities — is left out, so Barn never deletes it).
func journaledFiles(j *state.Journal) map[string]fileid.ID {
	out := map[string]fileid.ID{}
	for _, a := range j.Completed {
		if a.ID != nil {
			out[filepath.Base(a.Path)] = *a.ID
		}
	}
	return out
}

// recordSerialLog makes sure the serial console file QEMU is about to
// open is one Barn created and recorded, so destroy can delete it by that
// record. QEMU opens it with O_CREAT|O_TRUNC, which keeps the inode: Barn
// creates it first (never replacing anything) and records its identity in
// n.Files, or finds the one it recorded. An empty 0600 file of this user's
// with one link (what a start killed between creating and recording it
// leaves) is taken and recorded: truncating it loses nothing. Any other
// file at that name is a conflict (reason unexpected_files): QEMU would
// truncate it. State from before Barn kept
// identities, with a serial.log QEMU created then, is left as it was:
// that file is never deleted by Barn.
func (m *Manager) recordSerialLog(n *state.Node) error {
	p := m.Root.NodeFile(n.Node, state.SerialLogName)
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
	} else if n.SerialLog == p {
		if _, err := os.Lstat(p); err == nil {
			return nil // QEMU's, from before identities
		}
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
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
// stricter), as recordSerialLog creates it; a symlink is never followed.
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
