package hostnet

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"time"

	"github.com/godbus/dbus/v5"
)

// Firewalld is the part of firewalld's D-Bus API (bus name
// org.fedoraproject.FirewallD1, the API firewall-cmd itself calls) that
// barn-net uses: which zone binds an interface, and that binding in the
// runtime configuration. FirewalldBus is the real one; tests use a fake.
type Firewalld interface {
	// ZoneOfInterface returns the zone binding iface in firewalld's runtime
	// configuration or (permanent) its permanent one: "" when none,
	// running false when firewalld is not on the system bus.
	ZoneOfInterface(ctx context.Context, iface string, permanent bool) (zone string, running bool, err error)
	// RemoveInterface removes iface from zone in the runtime configuration.
	RemoveInterface(ctx context.Context, zone, iface string) error
	// ChangeZoneOfInterface binds iface to zone in the runtime configuration.
	ChangeZoneOfInterface(ctx context.Context, zone, iface string) error
}

// FirewalldBus calls firewalld over the system bus at the D-Bus
// specification's fixed address (never $DBUS_SYSTEM_BUS_ADDRESS: the
// environment does not redirect barn-net), one private connection per
// call. Calls never start firewalld (no D-Bus activation). Under TCG a
// firewall-cmd run (Python) took 2.2-2.7 s where this call takes 0.2-0.4 s.
type FirewalldBus struct {
	addr string // the bus address; "" is systemBus (tests set another)
}

const (
	systemBus    = "unix:path=/var/run/dbus/system_bus_socket"
	fwdName      = "org.fedoraproject.FirewallD1"
	fwdPath      = "/org/fedoraproject/FirewallD1"
	fwdZone      = fwdName + ".zone"
	fwdConfig    = fwdName + ".config"
	fwdConfigObj = fwdPath + "/config"
)

// fwdTimeout bounds one call, connect to reply (libdbus's default reply
// timeout, which firewall-cmd had): a bus or firewalld that accepts and
// never answers is an error, not a hang. A variable for tests.
var fwdTimeout = 25 * time.Second

// call calls method on object path of firewalld with args and returns
// its reply, which must be one string (every method barn-net calls
// returns one); running is false when there is no system bus or
// firewalld does not own its name on it.
func (b FirewalldBus) call(ctx context.Context, path, method string, args ...any) (reply string, running bool, err error) {
	if err := ctx.Err(); err != nil {
		return "", false, err // dialling a unix socket ignores ctx
	}
	ctx, cancel := context.WithTimeout(ctx, fwdTimeout)
	defer cancel()
	conn, err := dbus.Connect(or(b.addr, systemBus), dbus.WithContext(ctx))
	if err != nil {
		if ctx.Err() == nil && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED)) {
			return "", false, nil // no system bus: no firewalld
		}
		return "", false, fmt.Errorf("connecting to the system bus: %w", err)
	}
	defer conn.Close()
	c := conn.Object(fwdName, dbus.ObjectPath(path)).CallWithContext(ctx, method, dbus.FlagNoAutoStart, args...)
	if n := dbusErrorName(c.Err); n == "org.freedesktop.DBus.Error.ServiceUnknown" || n == "org.freedesktop.DBus.Error.NameHasNoOwner" {
		return "", false, nil
	}
	err = c.Err
	if err == nil {
		var ok bool
		if len(c.Body) == 1 {
			reply, ok = c.Body[0].(string)
		}
		if !ok {
			err = fmt.Errorf("reply %v is not one string", c.Body)
		}
	}
	if err != nil {
		return "", true, fmt.Errorf("firewalld %s%v: %w", method[strings.LastIndexByte(method, '.')+1:], args, err)
	}
	return reply, true, nil
}

// dbusErrorName is the D-Bus error name of err ("" when err is no D-Bus
// error reply).
func dbusErrorName(err error) string {
	var v dbus.Error
	var p *dbus.Error
	switch {
	case errors.As(err, &v):
		return v.Name
	case errors.As(err, &p):
		return p.Name
	}
	return ""
}

// ZoneOfInterface implements Firewalld.
func (b FirewalldBus) ZoneOfInterface(ctx context.Context, iface string, permanent bool) (string, bool, error) {
	path, method := fwdPath, fwdZone+".getZoneOfInterface"
	if permanent {
		path, method = fwdConfigObj, fwdConfig+".getZoneOfInterface"
	}
	return b.call(ctx, path, method, iface)
}

// RemoveInterface implements Firewalld.
func (b FirewalldBus) RemoveInterface(ctx context.Context, zone, iface string) error {
	return b.change(ctx, "removeInterface", zone, iface)
}

// ChangeZoneOfInterface implements Firewalld.
func (b FirewalldBus) ChangeZoneOfInterface(ctx context.Context, zone, iface string) error {
	return b.change(ctx, "changeZoneOfInterface", zone, iface)
}

// change calls the zone method that changes iface's binding; firewalld
// not running is an error here (the change did not happen).
func (b FirewalldBus) change(ctx context.Context, method, zone, iface string) error {
	_, running, err := b.call(ctx, fwdPath, fwdZone+"."+method, zone, iface)
	if err == nil && !running {
		err = fmt.Errorf("firewalld %s(%s, %s): firewalld is not running", method, zone, iface)
	}
	return err
}

// firewalld is h.Firewalld, or the system bus's when unset.
func (h *Host) firewalld() Firewalld {
	if h.Firewalld != nil {
		return h.Firewalld
	}
	return FirewalldBus{}
}

// firewalldZone is the zone binding iface (firewalld.ZoneOfInterface).
func (h *Host) firewalldZone(ctx context.Context, iface string, permanent bool) (zone string, running bool, err error) {
	return h.firewalld().ZoneOfInterface(ctx, iface, permanent)
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
	return h.firewalld().RemoveInterface(ctx, "trusted", br)
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
	return h.firewalld().ChangeZoneOfInterface(ctx, was, br)
}
