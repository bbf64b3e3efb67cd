package hostnet

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// firewalldZone asks firewall-cmd which zone binds iface, in firewalld's
// runtime or (permanent) its permanent configuration: zone "" when none
// ("no zone", exit 2), running false when firewalld does not answer
// ("FirewallD is not running", or no firewall-cmd); any other failure is an error.
func (h *Host) firewalldZone(ctx context.Context, iface string, permanent bool) (zone string, running bool, err error) {
	argv := []string{"firewall-cmd", "--get-zone-of-interface=" + iface}
	if permanent {
		argv = []string{"firewall-cmd", "--permanent", "--get-zone-of-interface=" + iface}
	}
	out, err := h.run(ctx, argv...)
	switch {
	case err == nil:
		return firstLine(out), true, nil
	case strings.Contains(out, "no zone"):
		return "", true, nil
	case strings.Contains(out, "not running") || errors.Is(err, exec.ErrNotFound):
		return "", false, nil
	}
	return "", false, fmt.Errorf("%v: %w: %s", argv, err, firstLine(out))
}

// releaseTrustedZone removes firewalld's runtime binding of br to the
// trusted zone that Barn's connection (connection.zone trusted) made, once
// the connection and bridge are gone. NetworkManager removes that binding
// when it deactivates the connection; the live host-under-test guest
// showed it left behind when NetworkManager lost the device mid-teardown,
// and firewalld keeps bindings of interfaces that no longer exist. The
// binding is Barn's to remove only when it was not there before install
// (was, the recorded runtime zone) and firewalld's permanent configuration
// does not bind br (a user's own binding, which a reload would restore).
func (h *Host) releaseTrustedZone(ctx context.Context, br, was string) error {
	if was == "trusted" {
		return nil
	}
	zone, running, err := h.firewalldZone(ctx, br, false)
	if err != nil || !running || zone != "trusted" {
		return err
	}
	perm, _, err := h.firewalldZone(ctx, br, true)
	if err != nil || perm != "" {
		return err
	}
	return h.command(ctx, "firewall-cmd", "--zone=trusted", "--remove-interface="+br)
}

// restoreZone binds br again, in firewalld's runtime, to was, the zone
// it had before install, when the teardown of Barn's connection (zoned
// trusted) took that binding away: NetworkManager removes the interface
// from its zone when the connection goes down, also when the binding was
// there before Barn's. Nothing happens without a prior zone, with
// firewalld not running, or when br is bound to was already.
func (h *Host) restoreZone(ctx context.Context, br, was string) error {
	if was == "" {
		return nil
	}
	zone, running, err := h.firewalldZone(ctx, br, false)
	if err != nil || !running || zone == was {
		return err
	}
	return h.command(ctx, "firewall-cmd", "--zone="+was, "--change-interface="+br)
}
