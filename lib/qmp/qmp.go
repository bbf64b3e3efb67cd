// Package qmp is a small client for the QEMU Machine Protocol over a unix
// socket (format: QEMU docs/interop/qmp-spec.rst). It opens one short
// connection per command: greeting, qmp_capabilities, the command, close.
//
// It is Barn's own client rather than go-qemu's because go-qemu's
// SocketMonitor drops the error class of a QMP error reply; here a reply
// {"error": {"class": C, "desc": D}} becomes an *Error keeping both.
//
// Every operation is bounded by the Monitor's Timeout (default 5 s) and the
// caller's ctx. When nothing answers on the socket (no socket, refused,
// reset, closed or silent until the timeout) the error wraps ErrUnavailable.
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

// DefaultTimeout bounds one QMP operation (connect to reply).
const DefaultTimeout = 5 * time.Second

// maxRead bounds the bytes read from one connection.
const maxRead = 1 << 20

// ErrUnavailable is wrapped by every error meaning "nothing answers QMP on
// this socket": missing socket, refused or reset connection, closed before
// a reply, or silence until the timeout.
var ErrUnavailable = errors.New("QMP unavailable")

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
// socket but not as QMP. It is not ErrUnavailable: a live, confused peer
// must not be bypassed with signals.
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

var reqID atomic.Uint64

// Execute runs one command with optional arguments (nil for none) on a
// fresh connection and decodes its "return" value into out (nil to
// discard). Errors: *Error for a QMP error reply, *UnavailableError, ctx's
// error when ctx ends, *ProtocolError otherwise.
func (m Monitor) Execute(ctx context.Context, command string, args any, out any) error {
	timeout := m.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	parentDL, hasParentDL := ctx.Deadline()
	parentBound := hasParentDL && !parentDL.After(time.Now().Add(timeout))
	opCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	unavailable := func(op string, err error) error {
		if ctx.Err() != nil {
			return fmt.Errorf("QMP %s on %s: %w", command, m.Socket, ctx.Err())
		}
		if parentBound && isTimeout(err) {
			// The caller's deadline, not ours, ran out.
			return fmt.Errorf("QMP %s on %s: %w", command, m.Socket, context.DeadlineExceeded)
		}
		return &UnavailableError{Socket: m.Socket, Op: op, Err: err}
	}

	var d net.Dialer
	conn, err := d.DialContext(opCtx, "unix", m.Socket)
	if err != nil {
		return unavailable("connect", err)
	}
	defer conn.Close()
	deadline, _ := opCtx.Deadline()
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(opCtx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	dec := json.NewDecoder(io.LimitReader(conn, maxRead))
	var greeting map[string]json.RawMessage
	if err := dec.Decode(&greeting); err != nil {
		if isTransport(err) {
			return unavailable("greeting", err)
		}
		return &ProtocolError{Socket: m.Socket, Msg: "reading greeting: " + err.Error()}
	}
	if _, ok := greeting["QMP"]; !ok {
		return &ProtocolError{Socket: m.Socket, Msg: "first message is not a QMP greeting"}
	}
	if err := m.call(dec, conn, "qmp_capabilities", nil, nil); err != nil {
		if isTransport(err) {
			return unavailable("qmp_capabilities", err)
		}
		return err
	}
	err = m.call(dec, conn, command, args, out)
	if err != nil && isTransport(err) {
		if command == "quit" && !isTimeout(err) {
			return nil // QEMU closes the monitor as it quits
		}
		return unavailable(command, err)
	}
	return err
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

func (m Monitor) call(dec *json.Decoder, w io.Writer, command string, args any, out any) error {
	id := "barn-" + strconv.FormatUint(reqID.Add(1), 10)
	req := map[string]any{"execute": command, "id": id}
	if args != nil {
		req["arguments"] = args
	}
	b, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encoding QMP %s: %w", command, err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return err
	}
	for {
		var r reply
		if err := dec.Decode(&r); err != nil {
			if isTransport(err) {
				return err
			}
			return &ProtocolError{Socket: m.Socket, Msg: "reading reply to " + command + ": " + err.Error()}
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
			return &ProtocolError{Socket: m.Socket, Msg: "reply to " + command + " has neither return nor error"}
		}
		if out != nil {
			if err := json.Unmarshal(r.Return, out); err != nil {
				return &ProtocolError{Socket: m.Socket, Msg: "decoding reply to " + command + ": " + err.Error()}
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

// Identity returns QEMU's -name and -uuid (query-name, query-uuid).
func (m Monitor) Identity(ctx context.Context) (name, uuid string, err error) {
	var n struct {
		Name string `json:"name"`
	}
	if err := m.Execute(ctx, "query-name", nil, &n); err != nil {
		return "", "", err
	}
	var u struct {
		UUID string `json:"UUID"`
	}
	if err := m.Execute(ctx, "query-uuid", nil, &u); err != nil {
		return "", "", err
	}
	return n.Name, u.UUID, nil
}

// Verify checks that QMP answers as name and uuid (UUID compared
// case-insensitively); a difference is a *MismatchError.
func (m Monitor) Verify(ctx context.Context, name, uuid string) error {
	gotName, gotUUID, err := m.Identity(ctx)
	if err != nil {
		return err
	}
	if gotName != name || !strings.EqualFold(gotUUID, uuid) {
		return &MismatchError{Socket: m.Socket, WantName: name, WantUUID: uuid, GotName: gotName, GotUUID: gotUUID}
	}
	return nil
}

// Status returns query-status's "status" (e.g. "running", "paused",
// "prelaunch", "shutdown").
func (m Monitor) Status(ctx context.Context) (string, error) {
	var s struct {
		Status string `json:"status"`
	}
	if err := m.Execute(ctx, "query-status", nil, &s); err != nil {
		return "", err
	}
	return s.Status, nil
}

// Powerdown sends system_powerdown (an ACPI power-button press; the guest
// may ignore it).
func (m Monitor) Powerdown(ctx context.Context) error {
	return m.Execute(ctx, "system_powerdown", nil, nil)
}

// Quit sends quit: QEMU exits without a guest shutdown.
func (m Monitor) Quit(ctx context.Context) error { return m.Execute(ctx, "quit", nil, nil) }

// Identity is Monitor{Socket: socket}.Identity.
func Identity(ctx context.Context, socket string) (name, uuid string, err error) {
	return Monitor{Socket: socket}.Identity(ctx)
}

// Verify is Monitor{Socket: socket}.Verify.
func Verify(ctx context.Context, socket, name, uuid string) error {
	return Monitor{Socket: socket}.Verify(ctx, name, uuid)
}

// Status is Monitor{Socket: socket}.Status.
func Status(ctx context.Context, socket string) (string, error) {
	return Monitor{Socket: socket}.Status(ctx)
}

// Powerdown is Monitor{Socket: socket}.Powerdown.
func Powerdown(ctx context.Context, socket string) error {
	return Monitor{Socket: socket}.Powerdown(ctx)
}

// Quit is Monitor{Socket: socket}.Quit.
func Quit(ctx context.Context, socket string) error { return Monitor{Socket: socket}.Quit(ctx) }
