package hostnet

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// bridgeLearned reports the port on which bridge's forwarding database
// holds mac (an RTM_GETNEIGH dump of family AF_BRIDGE; unprivileged).
func bridgeLearned(bridge string, mac net.HardwareAddr) (port string, found bool, err error) {
	br, err := netlink.LinkByName(bridge)
	if err != nil {
		return "", false, fmt.Errorf("bridge %s: %w", bridge, err)
	}
	fdb, err := dump(func() ([]netlink.Neigh, error) { return netlink.NeighList(0, unix.AF_BRIDGE) })
	if err != nil {
		return "", false, fmt.Errorf("reading the forwarding database of %s: %w", bridge, err)
	}
	idx := br.Attrs().Index
	for _, e := range fdb {
		if e.MasterIndex != idx || !bytes.Equal(e.HardwareAddr, mac) {
			continue
		}
		port = fmt.Sprintf("ifindex %d", e.LinkIndex)
		if l, err := netlink.LinkByIndex(e.LinkIndex); err == nil {
			port = l.Attrs().Name
		}
		return port, true, nil
	}
	return "", false, nil
}

const (
	arpRequest = 1
	arpReply   = 2
	arpLen     = 28 // Ethernet/IPv4 ARP payload
)

// probeARP sends p.Count RFC 5227 probes for ip on ifname and returns the
// first holder: an ARP packet from another hardware address whose sender
// IP is ip (a reply or an announcement), or another host's probe for ip
// (sender IP 0, target ip). nil once the window ends without one.
func probeARP(ctx context.Context, ifname string, ip netip.Addr, p Probe) (*Holder, error) {
	ifc, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("bridge %s: %w", ifname, err)
	}
	if len(ifc.HardwareAddr) != 6 {
		return nil, fmt.Errorf("%s has no Ethernet address", ifname)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ARP)))
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return nil, fmt.Errorf("%w: %v", errNoRaw, err)
	}
	if err != nil {
		return nil, fmt.Errorf("AF_PACKET socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: ifc.Index}); err != nil {
		return nil, fmt.Errorf("binding the ARP socket to %s: %w", ifname, err)
	}
	probe := arpProbe(ifc.HardwareAddr, ip)
	dst := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: ifc.Index, Halen: 6,
		Addr: [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	start := time.Now()
	end := start.Add(time.Duration(p.Count-1)*p.Interval + p.Wait)
	if d, ok := ctx.Deadline(); ok && d.Before(end) {
		end = d
	}
	sent := 0
	buf := make([]byte, 1500)
	for {
		now := time.Now()
		if sent < p.Count && !now.Before(start.Add(time.Duration(sent)*p.Interval)) {
			if err := unix.Sendto(fd, probe, 0, dst); err != nil {
				return nil, fmt.Errorf("sending an ARP probe on %s: %w", ifname, err)
			}
			sent++
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		next := end
		if sent < p.Count {
			next = start.Add(time.Duration(sent) * p.Interval)
		}
		if !now.Before(end) {
			return nil, nil
		}
		h, err := readARP(fd, buf, next.Sub(now), ifc.HardwareAddr, ip)
		if h != nil || err != nil {
			return h, err
		}
	}
}

// readARP waits up to d for one ARP packet on fd and returns its holder
// verdict for ip (nil when the packet, if any, says nothing about ip).
func readARP(fd int, buf []byte, d time.Duration, self net.HardwareAddr, ip netip.Addr) (*Holder, error) {
	ms := int(d / time.Millisecond)
	if ms < 1 {
		ms = 1
	}
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, ms)
	if errors.Is(err, unix.EINTR) || n == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("waiting for ARP answers: %w", err)
	}
	got, from, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT)
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading ARP answers: %w", err)
	}
	if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
		return nil, nil // our own probe
	}
	return arpHolder(buf[:got], self, ip), nil
}

// arpProbe is an RFC 5227 probe: request, sender hardware self, sender IP
// 0.0.0.0, target hardware zero, target IP ip.
func arpProbe(self net.HardwareAddr, ip netip.Addr) []byte {
	b := make([]byte, arpLen)
	binary.BigEndian.PutUint16(b[0:], 1)      // hardware type Ethernet
	binary.BigEndian.PutUint16(b[2:], 0x0800) // protocol IPv4
	b[4], b[5] = 6, 4
	binary.BigEndian.PutUint16(b[6:], arpRequest)
	copy(b[8:14], self)
	t := ip.As4()
	copy(b[24:28], t[:])
	return b
}

// arpHolder judges one received ARP payload (RFC 5227 §2.1.1): a packet
// from another hardware address whose sender IP is ip, or a probe by
// another host whose target is ip, means ip is held or being claimed.
func arpHolder(b []byte, self net.HardwareAddr, ip netip.Addr) *Holder {
	if len(b) < arpLen || binary.BigEndian.Uint16(b[0:]) != 1 || binary.BigEndian.Uint16(b[2:]) != 0x0800 || b[4] != 6 || b[5] != 4 {
		return nil
	}
	op := binary.BigEndian.Uint16(b[6:])
	sha := net.HardwareAddr(bytes.Clone(b[8:14]))
	spa := netip.AddrFrom4([4]byte(b[14:18]))
	tpa := netip.AddrFrom4([4]byte(b[24:28]))
	if bytes.Equal(sha, self) {
		return nil
	}
	held := spa == ip && (op == arpReply || op == arpRequest)
	probing := op == arpRequest && spa.IsUnspecified() && tpa == ip
	if held || probing {
		return &Holder{Address: ip.String(), MAC: sha.String(), How: "arp"}
	}
	return nil
}

// htons is v in network byte order, as AF_PACKET wants its protocol.
func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}

// procRoot is where processHolder reads the host's processes.
var procRoot = "/proc"

// processHolder finds a running process whose command line attaches a
// NIC with the hardware address mac to bridge (argvHolds) from this
// process's network namespace: a QEMU holds the MAC from the moment it
// starts, before its guest sends a frame the bridge could learn or
// answers an ARP probe. A process in another network namespace (another
// lab's bridge of the same name) is not a holder; one whose namespace
// cannot be read (another user's, without privilege) counts as this one.
// Every user's command lines are readable unless /proc is mounted with
// hidepid (then only the caller's own are seen). Processes that end while
// being read are skipped.
func processHolder(addr, bridge string, mac net.HardwareAddr) (*Holder, error) {
	ents, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", procRoot, err)
	}
	self, _ := os.Readlink(filepath.Join(procRoot, "self", "ns", "net"))
	want := strings.ToLower(mac.String())
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		dir := filepath.Join(procRoot, e.Name())
		b, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err != nil || !argvHolds(strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), want, bridge) {
			continue
		}
		if ns, err := os.Readlink(filepath.Join(dir, "ns", "net")); err == nil && self != "" && ns != self {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join(dir, "comm"))
		return &Holder{Address: addr, MAC: mac.String(), How: "process", PID: pid, Command: strings.TrimSpace(string(comm))}, nil
	}
	return nil, nil
}
