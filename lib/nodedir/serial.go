package nodedir

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/fileid"
	"barn.dev/lib/safefile"
	"barn.dev/lib/state"
)

// EmptyFile is a create function for Artifact that writes an empty 0600
// file: the serial log, which the node's create publishes and journals
// like every other artifact, so it is recorded before QEMU ever opens it.
func EmptyFile(stage string) error {
	if err := safefile.Write(stage, nil, state.FileMode); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "creating %s", stage)
	}
	return nil
}

// RecordSerialLog makes sure the serial console file QEMU is about to
// open (nodes/<node>/serial.log, -serial file:, opened with O_TRUNC,
// which keeps the inode) is the file n.Files records: the create made it
// (EmptyFile) and recorded it, so it is found and nothing is done. When
// the recorded file is gone (someone deleted the log), a new one is
// created, never replacing anything, and recorded in n.Files from the
// descriptor that created it, and n is written at once. Any other file at that
// name — whatever its size or mode — is a conflict (reason
// unexpected_files): QEMU would truncate it, and Barn never adopts a file
// no record proves it created. (A start killed between re-creating a
// deleted log and writing n leaves such a file: the next start names it.)
func (s *Store) RecordSerialLog(n *state.Node) error {
	return s.recordLog(n, state.SerialLogName, n.SerialLog)
}

// RecordQEMULog does for QEMU's own log (nodes/<node>/qemu.log, -D,
// which QEMU 7.2 opens with fopen "w" and, once daemonized, points its
// stderr at) what RecordSerialLog does for the serial console: the first
// start creates and records it, later starts find it, and anything else
// at that name is unexpected_files. Destroy deletes it by this record.
func (s *Store) RecordQEMULog(n *state.Node) error {
	return s.recordLog(n, state.QEMULogName, s.Root.NodeFile(n.Node, state.QEMULogName))
}

// recordLog makes p, a log QEMU truncates when it opens it, the file
// n.Files records under name (see RecordSerialLog).
func (s *Store) recordLog(n *state.Node, name, p string) error {
	if id, ok := n.Files[name]; ok {
		why, err := id.Differs(p)
		switch {
		case err == nil && why == "":
			return nil
		case err == nil:
			return logTaken(n.Node, p, "not the file Barn created: "+why)
		case !fileid.Missing(err):
			return exitcode.Wrap(exitcode.Runtime, err, "checking %s", p)
		}
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, state.FileMode)
	if errors.Is(err, fs.ErrExist) {
		return logTaken(n.Node, p, "a file Barn did not create")
	} else if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "creating %s", p)
	}
	defer f.Close()
	id, err := fileid.OfFile(f)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "recording %s", p)
	}
	if n.Files == nil {
		n.Files = map[string]fileid.ID{}
	}
	n.Files[name] = id
	// Persist the record at once: a later refusal (the other log taken)
	// must not leave this new file unrecorded, or the next start and
	// destroy would refuse Barn's own file.
	if err := s.Root.WriteNode(n); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "recording %s", p)
	}
	return nil
}

func logTaken(node, p, why string) error {
	return exitcode.New(exitcode.Conflict, "%s: %s is %s; not starting QEMU, which would truncate it", node, p, why).
		WithReason("unexpected_files").WithNext("move " + p + " away, then barn-node start " + node)
}
