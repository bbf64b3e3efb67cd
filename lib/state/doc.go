// Package state owns every file under the state root (BARN_HOME, default
// ~/.barn): its layout, atomic writes, strict versioned documents, locks and
// the bounded event log. Every other package reaches the state root through
// it; nothing else creates, reads or removes files there by spelling names.
//
// # Root
//
// Open (creates) and Inspect (read-only, creates nothing) resolve BARN_HOME:
// absolute, not a symlink, not $HOME itself, a 0700 directory owned by the
// user. A bad value is usage (2); a symlinked, foreign-owned or non-0700
// root is integrity (7). The runtime directory (QMP sockets,
// pidfiles) is BARN_RUNTIME_DIR, else <BARN_HOME>/run: never under
// $XDG_RUNTIME_DIR, which systemd removes at the user's last logout while
// QEMU keeps running. Every socket path is checked against the 107-byte
// limit (NodeRuntime, CheckSocketPath); a node name too long for it gets
// the short directory <runtime>/@<16 hex of SHA-256(node)>.
//
// # Layout
//
// One table, in layout.go, names every file (see the comment there). Use
// Root's path methods (NodeFile(node, RootDiskName), …) rather than joining
// names by hand.
//
// # Documents
//
// Deployment (state.json), Node (nodes/<node>/state.json), Journal
// (nodes/<node>/prepare.json) and Transaction (nodes/<node>/transaction.json)
// are canonical JSON with a schema field, written with WriteFileAtomic
// (same-directory random temp file, fsync, rename, parent fsync; mode 0600;
// symlink targets and non-directory parents refused). Read* return
// (nil, nil) when the file does not exist and an integrity error (7) naming
// the file, with a Problem as Detail, when it is damaged: a symlink, not a
// regular file, mode other than 0600, foreign owner, oversized, unknown
// fields, trailing data, a newer or foreign schema, a hash mismatch, or any
// invalid value (Validate*). A damaged file is never reported as absent.
// Write* fill schema and timestamps, validate, and refuse (runtime, 1) a
// document that would not read back.
//
// # File identities
//
// A path is not proof of ownership: a file copied or restored over Barn's
// has the same name. Node.Files and each completed journal Artifact.ID
// record the identity (lib/fileid: device, inode, birth time, inode
// generation; the SHA-256 for seed.iso) of every file Barn created or
// moved into a node directory, taken when Barn created it. Destroy and
// rollback delete (and move into disks/) a recorded file only while the
// file at its path still has that identity; otherwise it is kept, and the
// command fails as a conflict (reason unexpected_files) naming it, why,
// and a next: hint. lib/nodedir is the only code that acts on them. Node
// state or a journal without an identity for every file it records was
// written by an earlier development build: it is refused as integrity
// (7), reason dev_build_format (earlier.go), never read.
//
// # Locks
//
// Advisory flock(2) locks on files under locks/ (gofrs/flock): deployment,
// node-<node>, images. The fixed order is deployment → nodes (sorted;
// LockNodes and WithNodeLocks do this) → images; the events lock is a leaf,
// held exclusively inside AppendEvent and RemoveEvents and shared by the
// event readers. A Root enforces the order at run time: a
// lock that sorts before one it holds is refused (runtime, reason
// lock_order). A holder
// writes {schema, pid, command, started} into its lock file and clears it
// on Unlock; the kernel releases the lock when a holder dies, and a record
// whose pid no longer exists is reported as free. A busy lock is conflict
// (4) with reason deployment_busy / node_busy / images_busy and the holder as
// Detail; waiting callers poll every 25 ms for up to Root.LockWait (10 min)
// or Root.ImagesLockWait (30 s), bounded by their context. Read-only callers
// use Holder, which never waits, and LockHolder.Note for their note.
//
// # Events
//
// AppendEvent appends one barn.event/v1 line (≤64 KiB; a long message is cut)
// to events.jsonl under locks/events.lock, opening with O_NOFOLLOW; past
// 8 MiB the file is atomically replaced by its last ~4 MiB from a line
// boundary. ReadEvents, FollowEvents and Verify read it strictly, under
// the events lock taken shared, so they never see a record being
// appended: a last line without its newline is a torn record, an
// integrity error (reason torn_event) naming the file and the record's
// byte offset, never silently dropped. An append after a torn record
// starts on a new line, leaving the torn bytes as the evidence.
//
// # Verify
//
// Root.Verify checks everything (directories, documents, lock records, the
// event log, unexpected entries in node directories) without modifying
// anything and returns every Problem found.
package state
