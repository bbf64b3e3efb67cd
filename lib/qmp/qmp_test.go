package qmp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// serve runs a scripted QMP peer on a fresh socket: handle gets each
// connection after the listener accepted it.
func serve(t *testing.T, handle func(c net.Conn)) string {
	t.Helper()
	return serveAt(t, filepath.Join(t.TempDir(), "q.sock"), handle)
}

// serveAt is serve on the socket path sock.
func serveAt(t *testing.T, sock string, handle func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); handle(c) }()
		}
	}()
	return sock
}

// qemuLike greets, negotiates, and answers commands with answer(cmd),
// sending an event before every reply.
func qemuLike(answer func(cmd string) map[string]any) func(net.Conn) {
	return func(c net.Conn) {
		enc := json.NewEncoder(c)
		sc := bufio.NewScanner(c)
		enc.Encode(map[string]any{"QMP": map[string]any{"version": map[string]any{}, "capabilities": []string{}}})
		for sc.Scan() {
			var req struct {
				Execute string `json:"execute"`
				ID      any    `json:"id"`
			}
			json.Unmarshal(sc.Bytes(), &req)
			enc.Encode(map[string]any{"event": "RTC_CHANGE", "data": map[string]any{}})
			if req.Execute == "qmp_capabilities" {
				enc.Encode(map[string]any{"return": map[string]any{}, "id": req.ID})
				continue
			}
			r := answer(req.Execute)
			if r == nil {
				return // close without reply
			}
			r["id"] = req.ID
			enc.Encode(r)
		}
	}
}

func TestIdentityAndErrorClass(t *testing.T) {
	sock := serve(t, qemuLike(func(cmd string) map[string]any {
		switch cmd {
		case "query-name":
			return map[string]any{"return": map[string]any{"name": "n1"}}
		case "query-uuid":
			return map[string]any{"return": map[string]any{"UUID": "6F1C2A52-8D0E-4C43-9A55-2B7F7F1D0C11"}}
		case "query-status":
			return map[string]any{"return": map[string]any{"status": "paused", "running": false}}
		case "quit":
			return nil
		}
		return map[string]any{"error": map[string]any{"class": "DeviceNotActive", "desc": "nope"}}
	}))
	ctx := context.Background()
	m := Monitor{Socket: sock}
	name, uuid, err := Identity(ctx, sock)
	if err != nil || name != "n1" || uuid != "6F1C2A52-8D0E-4C43-9A55-2B7F7F1D0C11" {
		t.Fatalf("Identity = %q %q %v", name, uuid, err)
	}
	if err := Verify(ctx, sock, "n1", "6f1c2a52-8d0e-4c43-9a55-2b7f7f1d0c11"); err != nil {
		t.Fatalf("Verify (case-insensitive UUID): %v", err)
	}
	err = Verify(ctx, sock, "n2", "6f1c2a52-8d0e-4c43-9a55-2b7f7f1d0c11")
	var me *MismatchError
	if !errors.Is(err, ErrIdentityMismatch) || !errors.As(err, &me) || me.GotName != "n1" {
		t.Fatalf("Verify other name: %v", err)
	}
	var st struct {
		Status string `json:"status"`
	}
	if err := m.Verified(ctx, "n1", "6f1c2a52-8d0e-4c43-9a55-2b7f7f1d0c11", "query-status", nil, &st); err != nil || st.Status != "paused" {
		t.Fatalf("Verified query-status = %q %v", st.Status, err)
	}
	if err := m.Verified(ctx, "n2", "6f1c2a52-8d0e-4c43-9a55-2b7f7f1d0c11", "system_powerdown", nil, nil); !errors.Is(err, ErrIdentityMismatch) {
		t.Fatalf("Verified as another name: %v, want a mismatch before anything is sent", err)
	}
	err = m.Execute(ctx, "system_powerdown", nil, nil)
	var qe *Error
	if !errors.As(err, &qe) || qe.Class != "DeviceNotActive" || qe.Desc != "nope" || qe.Command != "system_powerdown" || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrBusy) {
		t.Fatalf("Powerdown error %v: the QMP class must survive", err)
	}
	if err := m.Execute(ctx, "quit", nil, nil); err != nil {
		t.Fatalf("Quit closed without reply should succeed: %v", err)
	}
}

func TestUnavailable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()

	_, _, err := Identity(ctx, filepath.Join(dir, "missing.sock"))
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrBusy) || !errors.Is(err, syscall.ENOENT) || !Retryable(err) {
		t.Errorf("missing socket: %v", err)
	}

	// A socket file nobody listens on: ECONNREFUSED.
	stale := filepath.Join(dir, "stale.sock")
	ln, _ := net.Listen("unix", stale)
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	_, _, err = Identity(ctx, stale)
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, syscall.ECONNREFUSED) || !Retryable(err) {
		t.Errorf("stale socket: %v", err)
	}

	// Closes right after accepting: unavailable (EOF), retryable.
	closing := serve(t, func(c net.Conn) {})
	_, _, err = Identity(ctx, closing)
	if !errors.Is(err, ErrUnavailable) || !Retryable(err) {
		t.Errorf("closing peer: %v", err)
	}

	// The caller's cancellation is neither unavailable nor busy.
	hung := serve(t, func(c net.Conn) { time.Sleep(5 * time.Second) })
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, _, err = Identity(cctx, hung)
	if errors.Is(err, ErrUnavailable) || errors.Is(err, ErrBusy) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled: %v", err)
	}
}

// TestBusyIsNotUnavailable: a monitor that accepts (or queues) a
// connection and stays silent is busy, never unavailable: that is what
// QEMU does while another client holds the monitor (it serves one client
// per monitor and leaves the rest in a listen backlog of 1), and once the
// backlog is full the kernel refuses with EAGAIN, which is busy too.
func TestBusyIsNotUnavailable(t *testing.T) {
	ctx := context.Background()
	busy := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrBusy) || errors.Is(err, ErrUnavailable) || Retryable(err) {
			t.Errorf("%s: %v, want busy (and not unavailable)", what, err)
		}
	}

	// Accepts and says nothing until the test ends: Identity returning at
	// all proves its own timeout ended the wait.
	hold := make(chan struct{})
	silent := serve(t, func(c net.Conn) { <-hold })
	t.Cleanup(func() { close(hold) })
	_, _, err := Monitor{Socket: silent, Timeout: 300 * time.Millisecond}.Identity(ctx)
	busy("silent peer", err)

	// Greets, then never replies to a command.
	mute := serve(t, qemuLike(func(cmd string) map[string]any { time.Sleep(5 * time.Second); return nil }))
	_, _, err = Monitor{Socket: mute, Timeout: 300 * time.Millisecond}.Identity(ctx)
	busy("silent after the greeting", err)

	// QEMU's own listener: backlog 1, nobody accepting while a client holds it.
	queued := backlogListener(t, 1)
	m := Monitor{Socket: queued, Timeout: 300 * time.Millisecond}
	var errs []error
	for i := 0; i < 4; i++ {
		_, _, err := m.Identity(ctx)
		errs = append(errs, err)
	}
	for i, err := range errs {
		busy(fmt.Sprintf("queued client %d", i+1), err)
	}
	if !errors.Is(errs[3], syscall.EAGAIN) {
		t.Errorf("a full backlog: %v, want EAGAIN (busy)", errs[3])
	}
}

// TestTimeoutBoundsEachWait: Timeout bounds each reply, not the session.
// A peer that takes most of a Timeout to answer each of several commands
// (QEMU realizing a hot-plugged vCPU on a loaded host) is served to the
// end although the session outlasts several Timeouts; the same peer's
// silence for a whole Timeout is still busy.
func TestTimeoutBoundsEachWait(t *testing.T) {
	const timeout = 400 * time.Millisecond
	sock := serve(t, qemuLike(func(cmd string) map[string]any {
		if cmd == "mute" {
			time.Sleep(5 * time.Second)
			return nil
		}
		time.Sleep(timeout / 2)
		return map[string]any{"return": map[string]any{}}
	}))
	s, err := Monitor{Socket: sock, Timeout: timeout}.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	for i := 0; i < 5; i++ {
		if err := s.Execute("slow", nil, nil); err != nil {
			t.Fatalf("slow command %d, %s into the session: %v", i+1, time.Since(start).Round(time.Millisecond), err)
		}
	}
	if d := time.Since(start); d < 2*timeout {
		t.Fatalf("the session took %s, not longer than its Timeout: the test proves nothing", d)
	}
	if err := s.Execute("mute", nil, nil); !errors.Is(err, ErrBusy) {
		t.Errorf("a reply silent for the whole Timeout: %v, want busy", err)
	}

	// The caller's deadline still bounds the whole session.
	ctx, cancel := context.WithTimeout(context.Background(), 3*timeout)
	defer cancel()
	s2, err := Monitor{Socket: sock, Timeout: timeout}.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	for err == nil {
		err = s2.Execute("slow", nil, nil)
	}
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrBusy) {
		t.Errorf("past the caller's deadline: %v, want its deadline, not busy", err)
	}
}

// backlogListener binds a unix socket with listen(2) backlog n and never
// accepts, like a QEMU monitor another client holds.
func backlogListener(t *testing.T, n int) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "held.sock")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, n); err != nil {
		t.Fatal(err)
	}
	return sock
}

// TestVerifiedIsOneConnection: the identity that authorises a command is
// read on the connection the command is sent on. Here the socket path is
// swapped for an impostor's as soon as the genuine QEMU has answered one
// command: identity read over separate connections would take the name
// from one QEMU and the UUID from the other, and send the command to the
// impostor.
func TestVerifiedIsOneConnection(t *testing.T) {
	const want = "6f1c2a52-8d0e-4c43-9a55-2b7f7f1d0c11"
	dir := t.TempDir()
	sock := filepath.Join(dir, "qmp.sock")
	for _, after := range []string{"query-name", "query-uuid"} {
		t.Run("swapped after "+after, func(t *testing.T) {
			var genuineGot, impostorGot []string
			var mu sync.Mutex
			impostor := serveAt(t, filepath.Join(t.TempDir(), "impostor.sock"), qemuLike(func(cmd string) map[string]any {
				mu.Lock()
				impostorGot = append(impostorGot, cmd)
				mu.Unlock()
				switch cmd {
				case "query-name":
					return map[string]any{"return": map[string]any{"name": "other"}}
				case "query-uuid":
					return map[string]any{"return": map[string]any{"UUID": want}}
				}
				return map[string]any{"return": map[string]any{}}
			}))
			os.Remove(sock)
			serveAt(t, sock, qemuLike(func(cmd string) map[string]any {
				mu.Lock()
				genuineGot = append(genuineGot, cmd)
				mu.Unlock()
				defer func() {
					if cmd == after {
						os.Rename(impostor, sock) // the path now reaches the impostor
					}
				}()
				switch cmd {
				case "query-name":
					return map[string]any{"return": map[string]any{"name": "n1"}}
				case "query-uuid":
					return map[string]any{"return": map[string]any{"UUID": "00000000-0000-4000-8000-000000000001"}}
				}
				return map[string]any{"return": map[string]any{}}
			}))
			err := Monitor{Socket: sock}.Verified(context.Background(), "n1", want, "system_powerdown", nil, nil)
			var me *MismatchError
			if !errors.As(err, &me) || me.GotName != "n1" || me.GotUUID != "00000000-0000-4000-8000-000000000001" {
				t.Errorf("Verified: %v, want the genuine QEMU's own name and UUID, a mismatch", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(impostorGot) != 0 {
				t.Errorf("the impostor received %q", impostorGot)
			}
			if got := strings.Join(genuineGot, " "); got != "query-name query-uuid" {
				t.Errorf("the genuine QEMU received %q", got)
			}
		})
	}
}

func TestProtocolError(t *testing.T) {
	sock := serve(t, func(c net.Conn) { c.Write([]byte("SSH-2.0-OpenSSH\r\n")) })
	_, _, err := Identity(context.Background(), sock)
	var pe *ProtocolError
	if !errors.As(err, &pe) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("garbage peer: %v, want a ProtocolError that is not unavailable", err)
	}
	notQMP := serve(t, func(c net.Conn) { c.Write([]byte(`{"hello": 1}` + "\n")) })
	if _, _, err := Identity(context.Background(), notQMP); !errors.As(err, &pe) {
		t.Fatalf("non-QMP greeting: %v", err)
	}
}
