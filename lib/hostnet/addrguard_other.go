//go:build !linux

package hostnet

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"runtime"
)

// On hosts without AF_PACKET and bridge netlink (macOS uses vmnet, whose
// DHCP range and managed addresses never meet another lab's bridge) the
// guard has no source: nothing is found, and the probe reports why.
func bridgeLearned(string, net.HardwareAddr) (string, bool, error) { return "", false, nil }

func processHolder(string, string, net.HardwareAddr) (*Holder, error) { return nil, nil }

func probeARP(context.Context, string, netip.Addr, Probe) (*Holder, error) {
	return nil, fmt.Errorf("%w: no AF_PACKET on %s", errNoRaw, runtime.GOOS)
}
