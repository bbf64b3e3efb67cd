package hostnet

import (
	"context"
	"net"
	"net/netip"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"barn.dev/lib/exitcode"
	"golang.org/x/sys/unix"
)

// TestLiveAddressGuard runs the guard against real kernels in a
// test-created namespace: bridge br0 with port va, whose veth peer vb holds
// 10.10.10.11 with the MAC Barn derives for it (the other lab's guest). The
// kernel answering on vb is the responder.
func TestLiveAddressGuard(t *testing.T) {
	live(t, func(t *testing.T, e *liveEnv) {
		for _, c := range [][]string{
			{"ip", "link", "add", "br0", "type", "bridge"},
			{"ip", "link", "add", "va", "type", "veth", "peer", "name", "vb"},
			{"ip", "link", "set", "va", "master", "br0"},
			{"ip", "link", "set", "vb", "address", "0a:ba:02:0a:0a:0b"},
			{"ip", "addr", "add", "10.10.10.11/24", "dev", "vb"},
			{"ip", "link", "set", "br0", "up"},
			{"ip", "link", "set", "va", "up"},
			{"ip", "link", "set", "vb", "up"},
		} {
			sh(t, c...)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p := Probe{Count: 3, Interval: 100 * time.Millisecond, Wait: 500 * time.Millisecond}

		// A free address and MAC: nobody answers within the window.
		got, err := CheckAddress(ctx, "br0", "10.10.10.12", "0a:ba:02:0a:0a:0c", p)
		if err != nil || got.Holder != nil || got.ProbeSkipped != nil {
			t.Fatalf("free address: %+v, %v; want no holder and a probe that ran", got, err)
		}

		// The address held by vb's kernel: its answer names vb's MAC.
		got, err = CheckAddress(ctx, "br0", "10.10.10.11", "0a:ba:02:0a:0a:99", p)
		if err != nil || got.Holder == nil {
			t.Fatalf("held address: %+v, %v; want a holder", got, err)
		}
		if h := *got.Holder; h.How != "arp" || h.MAC != "0a:ba:02:0a:0a:0b" || h.Address != "10.10.10.11" {
			t.Fatalf("holder %+v, want arp answer from 0a:ba:02:0a:0a:0b", h)
		}

		// vb's answer crossed port va, so the bridge learned its MAC: a
		// node with that MAC is refused even at another address, without
		// any probe.
		got, err = CheckAddress(ctx, "br0", "10.10.10.50", "0a:ba:02:0a:0a:0b", p)
		if err != nil || got.Holder == nil || got.Holder.How != "fdb" || got.Holder.Port != "va" {
			t.Fatalf("learned MAC: %+v, %v; want fdb holder on port va", got, err)
		}

		// Without CAP_NET_RAW (dropped on this thread only) the probe does
		// not run and says so; the MAC table alone still finds vb's MAC.
		withoutNetRaw(t, func() {
			got, err := CheckAddress(ctx, "br0", "10.10.10.11", "0a:ba:02:0a:0a:0b", p)
			if err != nil || got.ProbeSkipped == nil || got.Holder == nil || got.Holder.How != "fdb" {
				t.Errorf("without CAP_NET_RAW: %+v, %v; want a skipped probe and the fdb holder", got, err)
			}
			got, err = CheckAddress(ctx, "br0", "10.10.10.12", "0a:ba:02:0a:0a:0c", p)
			if err != nil || got.ProbeSkipped == nil || got.Holder != nil {
				t.Errorf("without CAP_NET_RAW, free: %+v, %v; want a skipped probe, no holder", got, err)
			}
		})

		// The refusal names the address, the MAC and a way out.
		xe := AddressInUse("pg-test-1", "br0", "0a:ba:02:0a:0a:0b", &Holder{Address: "10.10.10.11", MAC: "0a:ba:02:0a:0a:0b", How: "arp"})
		if xe.Class != exitcode.Resource || xe.Reason != "address_in_use" || xe.Next == "" {
			t.Fatalf("refusal %+v", xe)
		}
		for _, want := range []string{"10.10.10.11", "0a:ba:02:0a:0a:0b", "br0", "pg-test-1"} {
			if !strings.Contains(xe.Error(), want) {
				t.Errorf("refusal %q does not name %s", xe.Error(), want)
			}
		}

		// No bridge: the check itself fails; it never says "free".
		if _, err := CheckAddress(ctx, "nobr0", "10.10.10.12", "0a:ba:02:0a:0a:0c", p); err == nil {
			t.Fatal("a missing bridge gave a verdict")
		}
		_ = exec.Command("ip", "link", "del", "va").Run()
	})
}

// TestARPHolder is RFC 5227 §2.1.1's conflict rule on single packets.
func TestARPHolder(t *testing.T) {
	self, _ := net.ParseMAC("02:00:00:00:00:01")
	other, _ := net.ParseMAC("0a:ba:02:0a:0a:0b")
	ip := netip.MustParseAddr("10.10.10.11")
	pkt := func(op uint16, sha net.HardwareAddr, spa, tpa string) []byte {
		b := arpProbe(sha, netip.MustParseAddr(tpa))
		b[7] = byte(op)
		s := netip.MustParseAddr(spa).As4()
		copy(b[14:18], s[:])
		return b
	}
	for _, c := range []struct {
		name string
		b    []byte
		held bool
	}{
		{"reply from the holder", pkt(arpReply, other, "10.10.10.11", "0.0.0.0"), true},
		{"announcement by the holder", pkt(arpRequest, other, "10.10.10.11", "10.10.10.11"), true},
		{"another host probing for it", pkt(arpRequest, other, "0.0.0.0", "10.10.10.11"), true},
		{"another host probing for another address", pkt(arpRequest, other, "0.0.0.0", "10.10.10.12"), false},
		{"a request from another address about it", pkt(arpRequest, other, "10.10.10.1", "10.10.10.11"), false},
		{"a reply for another address", pkt(arpReply, other, "10.10.10.12", "0.0.0.0"), false},
		{"our own probe", pkt(arpRequest, self, "0.0.0.0", "10.10.10.11"), false},
		{"truncated", pkt(arpReply, other, "10.10.10.11", "0.0.0.0")[:20], false},
	} {
		h := arpHolder(c.b, self, ip)
		if (h != nil) != c.held {
			t.Errorf("%s: holder %+v, want held=%v", c.name, h, c.held)
		}
		if h != nil && (h.MAC != other.String() || h.Address != ip.String() || h.How != "arp") {
			t.Errorf("%s: holder %+v", c.name, h)
		}
	}
}

// withoutNetRaw runs f on a thread whose effective capabilities lack
// CAP_NET_RAW. The thread is never unlocked, so it exits with the
// goroutine and no other goroutine runs without the capability.
func withoutNetRaw(t *testing.T, f func()) {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			done <- err
			return
		}
		data[unix.CAP_NET_RAW/32].Effective &^= 1 << (unix.CAP_NET_RAW % 32)
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			done <- err
			return
		}
		f()
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatalf("dropping CAP_NET_RAW: %v", err)
	}
}
