// Package qmp is a small client for the QEMU Machine Protocol over a unix
// socket (format: QEMU docs/interop/qmp-spec.rst). A Session is one
// connection: greeting, qmp_capabilities, then commands. Everything Barn
// decides from QMP is decided on one Session: Verified checks query-name
// and query-uuid and sends the command on the same connection, so a socket
// swapped between two connections can never make one QEMU's identity
// authorise a command to another.
//
// # Why not go-qemu
//
// Barn has its own client rather than github.com/digitalocean/go-qemu's
// qmp.SocketMonitor because that one cannot keep the two things Barn's
// safety decisions rest on:
//
//   - Error classes. Its response.Err returns errors.New(desc): the QMP class
//     ("CommandNotFound", "DeviceNotActive", …) is dropped. Here a reply
//     {"error": {"class": C, "desc": D}} becomes an *Error keeping both.
//   - Deadlines. NewSocketMonitor's timeout bounds only the dial; Connect
//     reads the greeting and Run waits for a reply with no deadline and no
//     context. QEMU serves one client per monitor and queues the others
//     in the listen backlog, so against a monitor another client holds,
//     go-qemu blocks forever, and a caller that adds its own timer cannot
//     tell "nothing listens" from "something listens but is busy". Here
//     every Session is bounded by the Monitor's Timeout and the caller's
//     ctx, and the two outcomes are distinct error classes.
//
// # Error classes
//
// ErrUnavailable: nothing answers, provably: no socket (ENOENT), nobody
// listening (ECONNREFUSED), or the peer closed or reset the connection
// before answering. ErrBusy: something listens but does not answer in
// time: the connection was accepted or queued and then stayed silent
// (another client holds the monitor, or the process cannot run), or the
// listen backlog is full (EAGAIN). A busy monitor is evidence that a
// process owns the socket; it must never be read as an absent QEMU.
package qmp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// DefaultTimeout bounds each wait of a Session: connecting with the
// greeting and capabilities, then each command's reply.
const DefaultTimeout = 5 * time.Second

// maxRead bounds the bytes read from one connection.
const maxRead = 1 << 20

// ErrUnavailable is wrapped by every error meaning "nothing answers QMP on
// this socket, provably": missing socket, refused or reset connection, or
// closed before a reply.
var ErrUnavailable = errors.New("QMP unavailable")

// ErrBusy is wrapped by every error meaning "something listens on this
// socket but did not answer within the timeout": silence after connecting,
// or a full listen backlog.
var ErrBusy = errors.New("QMP busy")

// ErrIdentityMismatch is wrapped by *MismatchError: QMP answered with
// another name or UUID than expected. It is always fail-closed.
var ErrIdentityMismatch = errors.New("QMP identity mismatch")

// Error is a QMP error reply, keeping QMP's error class (e.g.
// "GenericError", "CommandNotFound", "DeviceNotActive").
type Error struct {
	Command string
	Class   string
	Desc    string
}

func (e *Error) Error() string {
	return fmt.Sprintf("QMP %s: %s: %s", e.Command, e.Class, e.Desc)
}

// UnavailableError says nothing answered on Socket; it matches ErrUnavailable.
type UnavailableError struct {
	Socket string
	Op     string // "connect", "greeting", "qmp_capabilities" or the command
	Err    error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("QMP unavailable on %s (%s): %v", e.Socket, e.Op, e.Err)
}

// Unwrap returns the cause.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// BusyError says something listens on Socket but stayed silent at Op for
// the whole timeout (or refused to queue another client); it matches
// ErrBusy.
type BusyError struct {
	Socket string
	Op     string
	Err    error
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("QMP busy on %s (%s): something listens but does not answer: %v", e.Socket, e.Op, e.Err)
}

// Unwrap returns the cause.
func (e *BusyError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrBusy) true.
func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// MismatchError is an identity check failure; it matches ErrIdentityMismatch.
type MismatchError struct {
	Socket             string
	WantName, WantUUID string
	GotName, GotUUID   string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("QMP on %s answers as name %q uuid %q, expected name %q uuid %q",
		e.Socket, e.GotName, e.GotUUID, e.WantName, e.WantUUID)
}

// Is makes errors.Is(err, ErrIdentityMismatch) true.
func (e *MismatchError) Is(target error) bool { return target == ErrIdentityMismatch }

// ProtocolError is a malformed conversation: something answered on the
// socket but not as QMP. It is neither ErrUnavailable nor ErrBusy: a live,
// confused peer must not be bypassed with signals.
type ProtocolError struct {
	Socket string
	Msg    string
}

func (e *ProtocolError) Error() string { return "QMP protocol error on " + e.Socket + ": " + e.Msg }

// Retryable reports whether err is a transient startup condition: the socket
// does not exist yet (ENOENT), is not listening yet (ECONNREFUSED), or the
// connection was reset or closed under us (ECONNRESET, EPIPE, EOF).
func Retryable(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// Monitor is a QMP endpoint. The zero Timeout means DefaultTimeout.
type Monitor struct {
	Socket  string
	Timeout time.Duration
}

// Session is one negotiated QMP connection. Every command sent on it
// reaches the QEMU that greeted it. Each wait on it is bounded by the
// Monitor's Timeout: Open (connect, greeting, capabilities) as one, then
// each command from its send to its reply, so a session of many commands
// (a hot-plug of several devices) is not cut short by their sum, while a
// monitor that stays silent for one Timeout is still busy. The ctx given
// to Open bounds the whole session. It is not safe for concurrent use.
type Session struct {
	socket      string
	conn        net.Conn
	dec         *json.Decoder
	ctx         context.Context // the caller's
	timeout     time.Duration
	parentBound bool // the current wait ends at the caller's deadline, not ours
	stop        func() bool
}

var reqID atomic.Uint64

// Open connects, reads the greeting and negotiates capabilities. Errors:
// *UnavailableError, *BusyError, ctx's error when ctx ends, *ProtocolError
// or *Error otherwise.
func (m Monitor) Open(ctx context.Context) (*Session, error) {
	timeout := m.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	s := &Session{socket: m.Socket, ctx: ctx, timeout: timeout}
	deadline := s.waitDeadline()
	dialCtx, cancel := context.WithDeadline(ctx, deadline)
	conn, err := dial(dialCtx, m.Socket)
	cancel()
	if err != nil {
		return nil, s.transport("connect", "connect", err)
	}
	s.conn = conn
	conn.SetDeadline(deadline)
	s.stop = context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	s.dec = json.NewDecoder(io.LimitReader(conn, maxRead))

	var greeting map[string]json.RawMessage
	if err := s.dec.Decode(&greeting); err != nil {
		s.Close()
		if isTransport(err) {
			return nil, s.transport("connect", "greeting", err)
		}
		return nil, &ProtocolError{Socket: m.Socket, Msg: "reading greeting: " + err.Error()}
	}
	if _, ok := greeting["QMP"]; !ok {
		s.Close()
		return nil, &ProtocolError{Socket: m.Socket, Msg: "first message is not a QMP greeting"}
	}
	if err := s.execute("qmp_capabilities", nil, nil); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// waitDeadline starts one wait: Timeout from now, or the caller's
// deadline when that comes first (recorded in parentBound, so that its
// expiry is not read as a busy monitor).
func (s *Session) waitDeadline() time.Time {
	d := time.Now().Add(s.timeout)
	parentDL, ok := s.ctx.Deadline()
	s.parentBound = ok && !parentDL.After(d)
	if s.parentBound {
		return parentDL
	}
	return d
}

// dial connects to the unix socket path. A full listen backlog (EAGAIN:
// QEMU has not yet accepted the clients queued before us) is retried every
// 20 ms until ctx ends; the last EAGAIN is returned then, also when ctx
// ends during a retry (the full backlog, not the clock, is the cause).
func dial(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	var again error
	for {
		conn, err := d.DialContext(ctx, "unix", path)
		// The dialer checks ctx's deadline against the clock before ctx's
		// own timer has fired, so "ended" is either.
		if err != nil && again != nil && (ctx.Err() != nil || isTimeout(err)) {
			return nil, again
		}
		if !errors.Is(err, syscall.EAGAIN) {
			return conn, err
		}
		again = err
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

// Close closes the connection.
func (s *Session) Close() error {
	if s.stop != nil {
		s.stop()
	}
	if s.conn == nil {
		return nil
	}
	return s.conn.Close()
}

// transport classifies a transport error at op: the caller's context,
// busy (a timeout, or EAGAIN from a full backlog) or unavailable.
func (s *Session) transport(command, op string, err error) error {
	if s.ctx.Err() != nil {
		return fmt.Errorf("QMP %s on %s: %w", command, s.socket, s.ctx.Err())
	}
	if isTimeout(err) {
		if s.parentBound {
			// The caller's deadline, not ours, ran out.
			return fmt.Errorf("QMP %s on %s: %w", command, s.socket, context.DeadlineExceeded)
		}
		return &BusyError{Socket: s.socket, Op: op, Err: err}
	}
	if errors.Is(err, syscall.EAGAIN) {
		return &BusyError{Socket: s.socket, Op: op, Err: err}
	}
	return &UnavailableError{Socket: s.socket, Op: op, Err: err}
}

type reply struct {
	Return json.RawMessage `json:"return"`
	Error  *struct {
		Class string `json:"class"`
		Desc  string `json:"desc"`
	} `json:"error"`
	Event string `json:"event"`
	ID    any    `json:"id"`
}

// Execute runs one command with optional arguments (nil for none) on this
// session and decodes its "return" value into out (nil to discard).
// Errors: *Error for a QMP error reply, *UnavailableError, *BusyError,
// ctx's error when ctx ends, *ProtocolError otherwise. A quit that closes
// the connection before replying succeeded (QEMU closes as it quits).
// The reply is waited for up to the Monitor's Timeout (see Session).
func (s *Session) Execute(command string, args any, out any) error {
	s.conn.SetDeadline(s.waitDeadline())
	if s.ctx.Err() != nil { // ended before the deadline above was set: keep it ended
		s.conn.SetDeadline(time.Unix(1, 0))
	}
	return s.execute(command, args, out)
}

// execute is Execute within the current wait.
func (s *Session) execute(command string, args any, out any) error {
	err := s.call(command, args, out)
	if err != nil && isTransport(err) {
		if command == "quit" && !isTimeout(err) {
			return nil
		}
		return s.transport(command, command, err)
	}
	return err
}

func (s *Session) call(command string, args any, out any) error {
	id := "barn-" + strconv.FormatUint(reqID.Add(1), 10)
	req := map[string]any{"execute": command, "id": id}
	if args != nil {
		req["arguments"] = args
	}
	b, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encoding QMP %s: %w", command, err)
	}
	if _, err := s.conn.Write(append(b, '\n')); err != nil {
		return err
	}
	for {
		var r reply
		if err := s.dec.Decode(&r); err != nil {
			if isTransport(err) {
				return err
			}
			return &ProtocolError{Socket: s.socket, Msg: "reading reply to " + command + ": " + err.Error()}
		}
		if r.Event != "" {
			continue // asynchronous event interleaved with replies
		}
		if s, _ := r.ID.(string); s != id {
			continue // a reply to someone else's request
		}
		if r.Error != nil {
			return &Error{Command: command, Class: r.Error.Class, Desc: r.Error.Desc}
		}
		if r.Return == nil {
			return &ProtocolError{Socket: s.socket, Msg: "reply to " + command + " has neither return nor error"}
		}
		if out != nil {
			if err := json.Unmarshal(r.Return, out); err != nil {
				return &ProtocolError{Socket: s.socket, Msg: "decoding reply to " + command + ": " + err.Error()}
			}
		}
		return nil
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func isTransport(err error) bool {
	if isTimeout(err) || Retryable(err) || errors.Is(err, net.ErrClosed) {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe)
}

// Identity returns this QEMU's -name and -uuid (query-name, query-uuid,
// both on this session).
func (s *Session) Identity() (name, uuid string, err error) {
	var n struct {
		Name string `json:"name"`
	}
	if err := s.Execute("query-name", nil, &n); err != nil {
		return "", "", err
	}
	var u struct {
		UUID string `json:"UUID"`
	}
	if err := s.Execute("query-uuid", nil, &u); err != nil {
		return "", "", err
	}
	return n.Name, u.UUID, nil
}

// Verify checks that this session's QEMU answers as name and uuid (UUID
// compared case-insensitively); a difference is a *MismatchError.
func (s *Session) Verify(name, uuid string) error {
	gotName, gotUUID, err := s.Identity()
	if err != nil {
		return err
	}
	if gotName != name || !strings.EqualFold(gotUUID, uuid) {
		return &MismatchError{Socket: s.socket, WantName: name, WantUUID: uuid, GotName: gotName, GotUUID: gotUUID}
	}
	return nil
}

// Verified runs command on one connection after proving on that same
// connection that QEMU answers as name and uuid; with command "" it only
// verifies. Errors are Open's, Verify's and Execute's.
func (m Monitor) Verified(ctx context.Context, name, uuid, command string, args, out any) error {
	s, err := m.Open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.Verify(name, uuid); err != nil {
		return err
	}
	if command == "" {
		return nil
	}
	return s.Execute(command, args, out)
}

// Verify proves on one connection that QMP answers as name and uuid.
func (m Monitor) Verify(ctx context.Context, name, uuid string) error {
	return m.Verified(ctx, name, uuid, "", nil, nil)
}

// Execute runs one command on a fresh session, with no identity check.
func (m Monitor) Execute(ctx context.Context, command string, args any, out any) error {
	s, err := m.Open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Execute(command, args, out)
}

// Identity returns QEMU's -name and -uuid, read on one connection.
func (m Monitor) Identity(ctx context.Context) (name, uuid string, err error) {
	s, err := m.Open(ctx)
	if err != nil {
		return "", "", err
	}
	defer s.Close()
	return s.Identity()
}

// Identity is Monitor{Socket: socket}.Identity.
func Identity(ctx context.Context, socket string) (name, uuid string, err error) {
	return Monitor{Socket: socket}.Identity(ctx)
}

// Verify is Monitor{Socket: socket}.Verify.
func Verify(ctx context.Context, socket, name, uuid string) error {
	return Monitor{Socket: socket}.Verify(ctx, name, uuid)
}
