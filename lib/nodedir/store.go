// Package nodedir is the one owner of a node's files under the state
// root: nodes/<node>/ (root overlay, data disks, seed, UEFI vars, the
// serial log Barn creates for QEMU, the write-ahead prepare journal and
// the destroy transaction record) and disks/<node>/ (retained persistent
// disks, through lib/disk). Nothing else in Barn creates, publishes,
// identifies, moves or deletes files there.
//
// The proof that a file is Barn's is its lib/fileid identity, recorded
// when Barn publishes the file and checked again as it is moved or
// deleted; a file that is not the one recorded is kept and named, never
// deleted.
//
// A create is write-ahead (Begin, Create.Artifact, Create.Reattach,
// Create.Commit): every artifact is journaled as an intent before it
// exists and as completed (with its identity) once it does, so a crash at
// any step leaves only files a journal entry proves are Barn's; Settle and
// Rollback settle such a directory. A destroy is resumable (BeginDestroy,
// Destroy.*): each finished step is recorded in the node's transaction
// record before the next begins.
//
// The orchestrator (lib/lifecycle) hands a Store its crash-injection hook
// and its progress writer; the Store makes no decisions about VMs.
package nodedir

import (
	"fmt"
	"io"
	"strings"
	"time"

	"barn.dev/lib/state"
)

// Hook is called at each step of a create, rollback or destroy. durable
// steps ("journal", "root-overlay", "data-disk", "seed", "nvram",
// "prepared", "committed", "journal-committed", "stopped", "preserved",
// "artifacts-removed", "state-removed") are records already on disk; the
// others are crash windows between two of them ("create-<kind>" once an
// artifact's intent is journaled and before it exists, "staged-<kind>"
// once its staging file's identity is journaled and before it is linked,
// "created-<kind>" once it is linked and before the journal records it
// as completed, "rollback-proven" once a rollback has proven every file
// and before it removes any, "reattach-data-disk"
// and "reattached-data-disk" around a retained disk's move, "released"
// between releasing reattached disks' markers and removing the journal).
// Tests panic in it to crash at a step; lifecycle logs the durable ones
// as events.
type Hook func(step, node string, durable bool)

// Store is the node directories of one state root.
type Store struct {
	Root *state.Root
	Hook Hook      // nil: no steps reported
	Log  io.Writer // progress lines; nil discards
	Now  func() time.Time
	// Again is the command that retries the create a refusal interrupted
	// (the next: hint of rollback's conflicts); nil means "barn-node apply".
	Again func() string
}

func (s *Store) step(step, node string) {
	if s.Hook != nil {
		s.Hook(step, node, true)
	}
}

func (s *Store) gap(step, node string) {
	if s.Hook != nil {
		s.Hook(step, node, false)
	}
}

func (s *Store) logf(format string, args ...any) {
	if s.Log == nil {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if !strings.HasSuffix(msg, "\n") {
		msg += "\n"
	}
	_, _ = io.WriteString(s.Log, msg)
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

func (s *Store) again() string {
	if s.Again != nil {
		return s.Again()
	}
	return "barn-node apply"
}

// SetPhase records n in phase p (updated now) as the node's state.
func (s *Store) SetPhase(n *state.Node, p state.Phase) error {
	n.Phase = p
	n.UpdatedAt = s.now()
	return s.Root.WriteNode(n)
}
