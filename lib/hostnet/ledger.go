package hostnet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/wire"
)

// LedgerSchema is the schema of <StateDir>/nm-uuids.json.
const LedgerSchema = "barn.net.nm-uuids/v1"

// Ledger is <StateDir>/nm-uuids.json (0600, root-owned): the UUID of every
// NetworkManager connection Barn handed to `nmcli connection add`, written
// before the add and kept after the manifest is gone, until Barn has seen
// NetworkManager drop that connection. A connection with Barn's mark and no
// manifest counting it is a leftover of Barn's only when its UUID is here
// (isLeftoverConn): the mark (name, type bridge, BridgeMAC) is something
// anyone can reproduce (nmcli connection clone keeps it), a random UUID
// Barn chose is not. With no entry left the file is removed, so a host
// Barn uninstalled cleanly keeps nothing of it.
type Ledger struct {
	Schema      string        `json:"schema"`
	Connections []LedgerEntry `json:"connections"`
}

// LedgerEntry is one UUID Barn handed to NetworkManager for the bridge
// Bridge. Seen: NetworkManager listed it after the add. An entry never
// seen may still be added late (an add that timed out, or a kill between
// this record and the add), so it is dropped only once NetworkManager has
// listed it and then no longer does.
type LedgerEntry struct {
	UUID   string `json:"uuid"`
	Bridge string `json:"bridge"`
	Seen   bool   `json:"seen"`
}

// LedgerPath is <StateDir>/nm-uuids.json.
func (h *Host) LedgerPath() string { return filepath.Join(h.StateDir, "nm-uuids.json") }

// Has reports whether uuid is recorded (NetworkManager prints UUIDs in
// lower case; the comparison ignores case).
func (l Ledger) Has(uuid string) bool {
	return slices.ContainsFunc(l.Connections, func(e LedgerEntry) bool { return strings.EqualFold(e.UUID, uuid) })
}

// readLedger returns the ledger, empty when there is none; a damaged one
// is integrity (7) naming the file (readOwned's checks), never "empty".
func (h *Host) readLedger() (Ledger, error) {
	path := h.LedgerPath()
	b, err := readOwned(path)
	if err != nil || b == nil {
		return Ledger{Schema: LedgerSchema, Connections: []LedgerEntry{}}, err
	}
	var l Ledger
	next := "sudo cat " + path + "   # then restore it, or remove it (sudo rm " + path + ") once nmcli connection show lists none of the UUIDs it names"
	if err := wire.DecodeStrict(b, &l); err != nil {
		return l, exitcode.Wrap(exitcode.Integrity, err, "the connection ledger %s is damaged", path).WithReason("manifest_damaged").WithNext(next)
	}
	if l.Schema != LedgerSchema {
		return l, exitcode.New(exitcode.Integrity, "the connection ledger %s: schema %q, want %q", path, l.Schema, LedgerSchema).WithReason("manifest_damaged").WithNext(next)
	}
	return l, nil
}

// updateLedger applies change to the ledger and writes it back atomically
// (0600), removing the file when no entry is left. The read, change and
// write hold an exclusive flock on StateDir itself (no lock file is left
// behind), so two barn-net processes never lose each other's UUIDs.
func (h *Host) updateLedger(change func(*Ledger)) error {
	if _, err := os.Lstat(h.StateDir); errors.Is(err, fs.ErrNotExist) {
		l := Ledger{Schema: LedgerSchema}
		if change(&l); len(l.Connections) == 0 {
			return nil // nothing to record: the state directory is not created for it
		}
	}
	if err := h.ensureStateDir(); err != nil {
		return err
	}
	dir, err := os.Open(h.StateDir)
	if err != nil {
		return err
	}
	defer dir.Close() // closing releases the lock
	if err := syscall.Flock(int(dir.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("locking %s: %w", h.StateDir, err)
	}
	l, err := h.readLedger()
	if err != nil {
		return err
	}
	change(&l)
	if len(l.Connections) == 0 {
		if err := os.Remove(h.LedgerPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	b, err := wire.MarshalIndent(l)
	if err != nil {
		return err
	}
	return writeAtomic(h.LedgerPath(), append(b, '\n'), 0o600)
}

// ledgerRecord records uuid, for bridge br, before it is handed to nmcli.
func (h *Host) ledgerRecord(uuid, br string) error {
	return h.updateLedger(func(l *Ledger) {
		if !l.Has(uuid) {
			l.Connections = append(l.Connections, LedgerEntry{UUID: uuid, Bridge: br})
		}
	})
}

// ledgerSeen marks uuid seen: NetworkManager lists it.
func (h *Host) ledgerSeen(uuid string) error {
	return h.updateLedger(func(l *Ledger) {
		for i := range l.Connections {
			if strings.EqualFold(l.Connections[i].UUID, uuid) {
				l.Connections[i].Seen = true
			}
		}
	})
}

// ledgerSettle drops uuid once NetworkManager no longer lists it: deleted
// says Barn just deleted it (so it was listed); otherwise only an entry
// seen before goes, and one never seen stays (a late add may still come).
func (h *Host) ledgerSettle(uuid string, deleted bool) error {
	return h.updateLedger(func(l *Ledger) {
		l.Connections = slices.DeleteFunc(l.Connections, func(e LedgerEntry) bool {
			return strings.EqualFold(e.UUID, uuid) && (deleted || e.Seen)
		})
	})
}

// ledgerForgetGone drops every UUID NetworkManager was seen to list and
// no longer lists (conns: its listing now): deleted behind Barn's back, by
// the user or a delete that timed out. No late add brings such a UUID
// back, and a connection made later with it is not Barn's; kept, it would
// also keep the state directory after uninstall.
func (h *Host) ledgerForgetGone(l Ledger, conns []NMConn) error {
	gone := func(e LedgerEntry) bool {
		return e.Seen && !slices.ContainsFunc(conns, func(c NMConn) bool { return strings.EqualFold(c.UUID, e.UUID) })
	}
	if !slices.ContainsFunc(l.Connections, gone) {
		return nil
	}
	return h.updateLedger(func(l *Ledger) { l.Connections = slices.DeleteFunc(l.Connections, gone) })
}

// keptNotes says what uninstall leaves of the ledger's UUIDs other than
// claimed (the manifest's own connection, "" for none): a connection
// NetworkManager lists with such a UUID is Barn's leftover, which the next
// install removes first; a UUID never seen and not listed stays recorded,
// since NetworkManager may still add it.
func (l Ledger) keptNotes(path string, conns []NMConn, claimed string) []string {
	var notes []string
	for _, e := range l.Connections {
		listed := slices.ContainsFunc(conns, func(c NMConn) bool { return strings.EqualFold(c.UUID, e.UUID) })
		switch {
		case strings.EqualFold(e.UUID, claimed):
		case listed:
			notes = append(notes, "kept: the connection "+e.UUID+" ("+e.Bridge+") is one Barn added ("+path+" records it) and no manifest counts it; the next barn-net install removes it first (next: sudo barn-net install, or nmcli connection delete uuid "+e.UUID+")")
		case !e.Seen:
			notes = append(notes, "kept: "+path+" records the connection "+e.UUID+" ("+e.Bridge+"), which Barn handed to nmcli connection add but never saw NetworkManager add; should NetworkManager still add it, the next barn-net install removes it first (next: nmcli connection show uuid "+e.UUID+"; once you are sure it will not come, sudo rm "+path+")")
		}
	}
	return notes
}
