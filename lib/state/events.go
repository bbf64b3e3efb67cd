package state

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/gofrs/flock"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/lazyre"
	"barn.dev/lib/quote"
	"barn.dev/lib/wire"
)

// Event log bounds (bytes).
const (
	MaxEventBytes     = 64 << 10 // one record, including its newline
	MaxEventsFileSize = 8 << 20  // past this the file is trimmed…
	EventsTrimTarget  = 4 << 20  // …to about its last 4 MiB, at a line boundary
)

// DeploymentEventNode is the node value of a deployment-wide event.
const DeploymentEventNode = "deployment"

var eventNameRE = lazyre.New(`^[a-z0-9][a-z0-9_.-]{0,63}$`)

var eventLevels = map[string]bool{"error": true, "warn": true, "info": true, "debug": true}

// ValidateEvent returns every problem of an event record.
func ValidateEvent(e *Event) []string {
	var p problems
	if e.Schema != EventSchema {
		p.addf("schema is %q, want %s", e.Schema, EventSchema)
	}
	if e.Time.IsZero() {
		p.addf("time is missing")
	}
	if !eventLevels[e.Level] {
		p.addf("level %q is not error, warn, info or debug", e.Level)
	}
	if !eventNameRE.MatchString(e.Node) {
		p.addf("node %q does not match ^[a-z0-9][a-z0-9_.-]{0,63}$", e.Node)
	}
	if !eventNameRE.MatchString(e.Action) {
		p.addf("action %q does not match ^[a-z0-9][a-z0-9_.-]{0,63}$", e.Action)
	}
	if e.OperationID != "" && len(e.OperationID) < 8 {
		p.addf("operation_id %q is shorter than 8 characters", e.OperationID)
	}
	return p
}

// AppendEvent appends e as one JSON line to <Dir>/events.jsonl. It fills
// Schema, Time (when zero), Level ("info" when empty) and Node
// ("deployment" when empty); a message that would make the record longer
// than 64 KiB is cut (at a UTF-8 boundary, with "…"). Appends are
// serialised by locks/events.lock; the file is opened with O_NOFOLLOW and
// mode 0600; when it grows past 8 MiB it is atomically replaced by its last
// ~4 MiB starting at a line boundary. An invalid event is a runtime error.
func (r *Root) AppendEvent(e Event) (err error) {
	e.Schema = EventSchema
	if e.Time.IsZero() {
		e.Time = r.now()
	}
	if e.Level == "" {
		e.Level = "info"
	}
	if e.Node == "" {
		e.Node = DeploymentEventNode
	}
	if p := ValidateEvent(&e); len(p) > 0 {
		return exitcode.New(exitcode.Runtime, "refusing to log an invalid event: %v", p).WithReason("invalid_event")
	}
	line, err := encodeEvent(&e)
	if err != nil {
		return err
	}
	unlock, err := r.lockEvents()
	if err != nil {
		return err
	}
	defer func() {
		if cerr := unlock(); cerr != nil && err == nil {
			err = cerr
		}
	}()

	path := r.EventsFile()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, FileMode)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return integrity(path, "is a symlink; refusing to append")
		}
		return exitcode.Wrap(exitcode.Runtime, err, "opening %s", path)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = exitcode.Wrap(exitcode.Runtime, cerr, "appending to %s", path)
		}
	}()
	fi, err := f.Stat()
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "opening %s", path)
	}
	if err := r.checkFileInfo(path, fi); err != nil {
		return err
	}
	if torn, err := endsTorn(f, fi.Size()); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "reading %s", path)
	} else if torn {
		// Keep the torn record as the evidence readers report, and this
		// one whole: it starts on a line of its own.
		line = append([]byte{'\n'}, line...)
	}
	if _, err := f.Write(line); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "appending to %s", path)
	}
	if fi.Size()+int64(len(line)) > MaxEventsFileSize {
		return r.trimEvents(path)
	}
	return nil
}

// endsTorn reports whether the log f of size bytes ends without a newline.
func endsTorn(f *os.File, size int64) (bool, error) {
	if size == 0 {
		return false, nil
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, size-1); err != nil {
		return false, err
	}
	return b[0] != '\n', nil
}

// lockEvents takes locks/events.lock exclusively (waiting), creating it;
// the returned function releases it. Writers (AppendEvent, RemoveEvents)
// hold it.
func (r *Root) lockEvents() (func() error, error) {
	if _, err := r.EnsureLocksDir(); err != nil {
		return nil, err
	}
	lockPath, err := r.lockFile(lockEventsName)
	if err != nil {
		return nil, err
	}
	fl := flock.New(lockPath, flock.SetFlag(os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_CLOEXEC), flock.SetPermissions(FileMode))
	return eventsLocked(lockPath, fl, fl.Lock())
}

// rlockEvents takes locks/events.lock shared (waiting for an append in
// progress), so a reader never sees a record being written. It creates
// nothing (Inspect roots read too): with no lock file, no append has
// started since the lock directory was made, and ok is false — the caller
// reads unlocked and, when it finds a torn tail, asks again.
func (r *Root) rlockEvents() (unlock func() error, ok bool, err error) {
	lockPath, err := r.lockFile(lockEventsName)
	if err != nil {
		return nil, false, err
	}
	fl := flock.New(lockPath, flock.SetFlag(os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC))
	lerr := fl.RLock()
	if errors.Is(lerr, fs.ErrNotExist) {
		return func() error { return nil }, false, nil
	}
	unlock, err = eventsLocked(lockPath, fl, lerr)
	return unlock, err == nil, err
}

func eventsLocked(lockPath string, fl *flock.Flock, err error) (func() error, error) {
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, integrity(lockPath, "is a symlink; refusing to lock through it")
		}
		return nil, exitcode.Wrap(exitcode.Runtime, err, "locking %s", lockPath)
	}
	return func() error {
		if err := fl.Close(); err != nil {
			return exitcode.Wrap(exitcode.Runtime, err, "releasing %s", lockPath)
		}
		return nil
	}, nil
}

// readEvents is scanEvents under the shared events lock (rlockEvents).
func (r *Root) readEvents(offset int64, filter EventFilter, fn func(Event) error) (end int64, err error) {
	for attempt := 0; ; attempt++ {
		unlock, locked, err := r.rlockEvents()
		if err != nil {
			return offset, err
		}
		end, err = r.scanEvents(offset, filter, fn)
		if uerr := unlock(); uerr != nil && err == nil {
			err = uerr
		}
		if locked || attempt > 0 || err == nil || exitcode.As(err).Reason != reasonTornEvent {
			return end, err
		}
		// Read unlocked and torn: the lock file may have been created by
		// an append that began meanwhile; once it exists, read again
		// under it (records already delivered are before offset end).
		if p, _ := r.lockFile(lockEventsName); !exists(p) {
			return end, err
		}
		offset = end
	}
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

// RemoveEvents removes <Dir>/events.jsonl (durably) under the events
// lock, only after reading it through as Barn's event log: every line a
// complete, valid barn.event/v1 record. A file that is not — another
// tool's file at that name, or a damaged log — is the integrity error
// naming it and is kept. A missing log is not an error.
func (r *Root) RemoveEvents() (err error) {
	unlock, err := r.lockEvents()
	if err != nil {
		return err
	}
	defer func() {
		if cerr := unlock(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	path := r.EventsFile()
	end, err := r.scanEvents(0, EventFilter{}, func(Event) error { return nil })
	if err != nil {
		return exitcode.As(err).WithNext("move " + path + " away after checking it")
	}
	if end < 0 {
		return nil
	}
	return RemoveFileDurable(path)
}

// encodeEvent returns the record's line, cutting the message to fit
// MaxEventBytes.
func encodeEvent(e *Event) ([]byte, error) {
	b, err := wire.Marshal(e)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "encoding event")
	}
	if len(b)+1 <= MaxEventBytes {
		return append(b, '\n'), nil
	}
	// Binary search for the longest message prefix (at a UTF-8 boundary)
	// whose record fits; escaping makes encoded length non-linear.
	fits := func(n int) ([]byte, bool) {
		c := *e
		c.Message = e.Message[:n] + "…"
		enc, err := wire.Marshal(&c)
		return enc, err == nil && len(enc)+1 <= MaxEventBytes
	}
	lo, hi := 0, len(e.Message)
	var best []byte
	for lo <= hi {
		mid := (lo + hi) / 2
		n := mid
		for n > 0 && n < len(e.Message) && !utf8.RuneStart(e.Message[n]) {
			n--
		}
		if enc, ok := fits(n); ok {
			best, lo = enc, mid+1
		} else {
			hi = mid - 1
		}
	}
	if best == nil {
		return nil, exitcode.New(exitcode.Runtime, "event record is larger than %d bytes", MaxEventBytes)
	}
	b = best
	return append(b, '\n'), nil
}

// trimEvents replaces the log by its last ~EventsTrimTarget bytes,
// starting after a newline. The caller holds the events lock. A log that
// does not read back whole (a torn or invalid record anywhere) is never
// trimmed: dropping its head could drop the damaged record, the evidence
// every reader and barn-state verify report until the user acts, so it
// is kept as it is and grows past MaxEventsFileSize instead.
func (r *Root) trimEvents(path string) error {
	if _, err := r.scanEvents(0, EventFilter{}, func(Event) error { return nil }); err != nil {
		if exitcode.ClassOf(err) == exitcode.Integrity {
			return nil
		}
		return err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "trimming %s", path)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "trimming %s", path)
	}
	start := fi.Size() - EventsTrimTarget
	if start < 0 {
		start = 0
	}
	tail := make([]byte, fi.Size()-start)
	if _, err := f.ReadAt(tail, start); err != nil && err != io.EOF {
		return exitcode.Wrap(exitcode.Runtime, err, "trimming %s", path)
	}
	if start > 0 {
		i := bytes.IndexByte(tail, '\n')
		if i < 0 {
			tail = nil
		} else {
			tail = tail[i+1:]
		}
	}
	return WriteFileAtomic(path, tail, FileMode)
}

// EventFilter selects events; empty fields match everything.
type EventFilter struct {
	Node string
}

func (f EventFilter) match(e *Event) bool { return f.Node == "" || e.Node == f.Node }

// ReadEvents returns the events of the log matching filter, oldest first
// (an empty list when there is no log), read under the shared events lock
// so no append is in progress. A line that is not a valid event is an
// integrity error naming the file and the record's byte offset; so is a
// torn last line (bytes with no terminating newline: a log cut
// mid-record), reason "torn_event" — never silently dropped.
func (r *Root) ReadEvents(filter EventFilter) ([]Event, error) {
	out := []Event{}
	_, err := r.readEvents(0, filter, func(e Event) error { out = append(out, e); return nil })
	return out, err
}

// reasonTornEvent is the reason of a log whose last record has no newline.
const reasonTornEvent = "torn_event"

// tornNext is the one manual step for a torn log at path: move it out of
// the state root beside it (its records kept; -n never overwrites an
// earlier one), after which Barn starts a new log. Barn never trims or
// removes the evidence itself.
func tornNext(path string) string {
	aside := filepath.Join(filepath.Dir(filepath.Dir(path)), "barn-events.torn.jsonl")
	return "mv -n " + quote.ShellIfNeeded(path) + " " + quote.ShellIfNeeded(aside) + "   # keeps its records outside the state root; Barn starts a new log"
}

// scanEvents reads the lines from offset and calls fn for each matching
// event. It returns the offset after the last complete line, or -1 when
// the file no longer exists. The caller holds the events lock (shared or
// exclusive), so an unterminated tail is a torn record, not an append in
// progress.
func (r *Root) scanEvents(offset int64, filter EventFilter, fn func(Event) error) (int64, error) {
	path := r.EventsFile()
	fi, err := os.Lstat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return -1, nil
		}
		return offset, integrity(path, "unreadable: %v", unwrapPath(err))
	}
	if err := r.checkFileInfo(path, fi); err != nil {
		return offset, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return offset, integrity(path, "unreadable: %v", unwrapPath(err))
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return offset, integrity(path, "unreadable: %v", err)
	}
	br := bufio.NewReaderSize(f, 64<<10)
	lineNo := 0
	for {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			if len(line) > 0 {
				return offset, integrity(path, "record at byte %d is torn: its %d bytes end without a newline (the log was cut mid-record)", offset, len(line)).
					WithReason(reasonTornEvent).WithNext(tornNext(path))
			}
			return offset, nil
		}
		if err != nil {
			return offset, integrity(path, "unreadable: %v", err)
		}
		lineNo++
		offset += int64(len(line))
		if len(line) > MaxEventBytes {
			return offset, integrity(path, "record at byte %d is longer than %d bytes", offset-int64(len(line)), MaxEventBytes)
		}
		var e Event
		if err := wire.DecodeStrict(line, &e); err != nil {
			return offset, integrity(path, "record at byte %d: %v", offset-int64(len(line)), err)
		}
		if p := ValidateEvent(&e); len(p) > 0 {
			return offset, integrity(path, "record at byte %d: %v", offset-int64(len(line)), p)
		}
		if filter.match(&e) {
			if err := fn(e); err != nil {
				return offset, err
			}
		}
	}
}

// FollowEvents calls fn for every matching event already in the log and
// then for each new one as it is appended, polling every interval, until
// ctx is done (it then returns nil). A trimmed log (replaced by its tail)
// is re-read from its start, skipping records already delivered by time.
func (r *Root) FollowEvents(ctx context.Context, filter EventFilter, interval time.Duration, fn func(Event) error) error {
	var offset int64
	var ino uint64
	var last, skipUntil time.Time
	deliver := func(e Event) error {
		if !skipUntil.IsZero() && !e.Time.After(skipUntil) {
			return nil // delivered before the log was trimmed
		}
		if e.Time.After(last) {
			last = e.Time
		}
		return fn(e)
	}
	for {
		fi, err := os.Lstat(r.EventsFile())
		if err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				if ino != 0 && st.Ino != ino || fi.Size() < offset {
					offset, skipUntil = 0, last // replaced by a trim
				}
				ino = st.Ino
			}
			next, err := r.readEvents(offset, filter, deliver)
			if err != nil {
				return err
			}
			if next >= 0 {
				offset = next
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}
