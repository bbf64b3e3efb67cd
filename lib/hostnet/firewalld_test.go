package hostnet

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
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
