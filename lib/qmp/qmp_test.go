package qmp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// serve runs a scripted QMP peer on a fresh socket: handle gets each
// connection after the listener accepted it.
func serve(t *testing.T, handle func(c net.Conn)) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "q.sock")
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
	if s, err := Status(ctx, sock); err != nil || s != "paused" {
		t.Fatalf("Status = %q %v", s, err)
	}
	err = Powerdown(ctx, sock)
	var qe *Error
	if !errors.As(err, &qe) || qe.Class != "DeviceNotActive" || qe.Desc != "nope" || qe.Command != "system_powerdown" || errors.Is(err, ErrUnavailable) {
		t.Fatalf("Powerdown error %v: the QMP class must survive", err)
	}
	if err := Quit(ctx, sock); err != nil {
		t.Fatalf("Quit closed without reply should succeed: %v", err)
	}
}

func TestUnavailable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()

	_, _, err := Identity(ctx, filepath.Join(dir, "missing.sock"))
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, syscall.ENOENT) || !Retryable(err) {
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

	// Accepts and says nothing: unavailable after the op timeout.
	hung := serve(t, func(c net.Conn) { time.Sleep(5 * time.Second) })
	start := time.Now()
	_, _, err = Monitor{Socket: hung, Timeout: 300 * time.Millisecond}.Identity(ctx)
	if !errors.Is(err, ErrUnavailable) || time.Since(start) > 2*time.Second {
		t.Errorf("hung peer: %v after %s", err, time.Since(start))
	}

	// Closes right after accepting: unavailable (EOF), retryable.
	closing := serve(t, func(c net.Conn) {})
	_, _, err = Identity(ctx, closing)
	if !errors.Is(err, ErrUnavailable) || !Retryable(err) {
		t.Errorf("closing peer: %v", err)
	}

	// The caller's cancellation is not "unavailable".
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, _, err = Identity(cctx, hung)
	if errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled: %v", err)
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
