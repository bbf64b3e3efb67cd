package procid

import (
	"encoding/binary"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// SocketClients returns the PIDs of the processes holding a connection to
// the unix stream socket listening at path, sorted. sock_diag(7)
// (NETLINK_SOCK_DIAG, AF_UNIX, UDIAG_SHOW_NAME|UDIAG_SHOW_PEER) lists the
// connected sockets bound to path, which are the listener's accepted ends,
// with their peers' inodes; /proc/<pid>/fd shows which processes hold
// those peers. Only processes whose descriptors this user may read are
// found (every process, for root). No client is not an error.
//
// (github.com/vishvananda/netlink's UnixSocketDiagInfo cannot be used: it
// reads unix_diag_msg's family and type swapped, stops at the first
// datagram socket, and returns each name with four bytes past its end.)
func SocketClients(path string) ([]int, error) {
	peers, err := unixPeers(path)
	if err != nil || len(peers) == 0 {
		return nil, err
	}
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", procRoot, err)
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		fds, err := os.ReadDir(fmt.Sprintf("%s/%d/fd", procRoot, pid))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if l, err := os.Readlink(fmt.Sprintf("%s/%d/fd/%s", procRoot, pid, fd.Name())); err == nil && peers[l] {
				out = append(out, pid)
				break
			}
		}
	}
	sort.Ints(out)
	return out, nil
}

// sock_diag constants (linux/sock_diag.h, linux/unix_diag.h).
const (
	sockDiagByFamily = 20 // SOCK_DIAG_BY_FAMILY
	udiagShowName    = 0x01
	udiagShowPeer    = 0x04
	unixDiagName     = 0 // UNIX_DIAG_NAME
	unixDiagPeer     = 2 // UNIX_DIAG_PEER
	tcpEstablished   = 1 // the state of a connected unix stream socket
	unixDiagMsgLen   = 16
)

// unixPeers returns "socket:[<inode>]" of the peers of every connected
// stream socket bound to path.
func unixPeers(path string) (map[string]bool, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, fmt.Errorf("sock_diag: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("sock_diag: %w", err)
	}
	// nlmsghdr (16) + unix_diag_req (24).
	req := make([]byte, 16+24)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], sockDiagByFamily)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	ne.PutUint32(req[8:], 1) // sequence
	req[16] = unix.AF_UNIX
	ne.PutUint32(req[20:], 1<<tcpEstablished)
	ne.PutUint32(req[28:], udiagShowName|udiagShowPeer)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("sock_diag: %w", err)
	}
	peers := map[string]bool{}
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, fmt.Errorf("sock_diag: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, fmt.Errorf("sock_diag: %w", err)
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return peers, nil
			case unix.NLMSG_ERROR:
				return nil, fmt.Errorf("sock_diag: the kernel refused the dump")
			}
			if len(m.Data) < unixDiagMsgLen || m.Data[2] != tcpEstablished {
				continue
			}
			name, peer := unixDiagAttrs(m.Data[unixDiagMsgLen:])
			if name == path && peer != 0 {
				peers["socket:["+strconv.FormatUint(uint64(peer), 10)+"]"] = true
			}
		}
	}
}

// unixDiagAttrs reads UNIX_DIAG_NAME and UNIX_DIAG_PEER from the rtattrs b.
func unixDiagAttrs(b []byte) (name string, peer uint32) {
	ne := binary.NativeEndian
	for len(b) >= 4 {
		l, typ := int(ne.Uint16(b[0:])), ne.Uint16(b[2:])
		if l < 4 || l > len(b) {
			return
		}
		v := b[4:l]
		switch typ {
		case unixDiagName: // sun_path as bound, often with its NUL
			name = strings.TrimRight(string(v), "\x00")
		case unixDiagPeer:
			if len(v) >= 4 {
				peer = ne.Uint32(v)
			}
		}
		b = b[min(len(b), (l+3)&^3):]
	}
	return
}
