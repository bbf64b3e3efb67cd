package hostnet

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestFirewalldBusWithoutABus: no socket, or a socket nobody accepts on,
// at the bus address is "firewalld not running"; a cancelled context is
// an error, never taken for that; a change with no firewalld is an error.
func TestFirewalldBusWithoutABus(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale")
	l, err := net.Listen("unix", stale)
	must(t, err)
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close() // the socket file stays; connecting is refused
	if _, err := os.Stat(stale); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"unix:path=" + filepath.Join(dir, "none"), "unix:path=" + stale} {
		b := FirewalldBus{addr: addr}
		zone, running, err := b.ZoneOfInterface(context.Background(), "barn0", false)
		if zone != "" || running || err != nil {
			t.Errorf("%s: zone %q running %v err %v; want firewalld not running", addr, zone, running, err)
		}
		if err := b.RemoveInterface(context.Background(), "trusted", "barn0"); err == nil {
			t.Errorf("%s: removeInterface with no firewalld succeeded", addr)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, _, err := b.ZoneOfInterface(ctx, "barn0", true); err == nil {
			t.Errorf("%s: a cancelled ask read as an answer", addr)
		}
	}
}

// TestFirewalldBusMuteBusIsAnError: a socket that accepts and never
// speaks D-Bus is an error once the call's bound passes, not a hang and
// not "not running".
func TestFirewalldBusMuteBusIsAnError(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "mute")
	l, err := net.Listen("unix", sock)
	must(t, err)
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, silent, until the listener closes
		}
	}()
	was := fwdTimeout
	fwdTimeout = 200 * time.Millisecond
	defer func() { fwdTimeout = was }()
	_, running, err := FirewalldBus{addr: "unix:path=" + sock}.ZoneOfInterface(context.Background(), "barn0", false)
	if err == nil || running {
		t.Fatalf("a mute bus: running %v, err %v; want an error", running, err)
	}
}
