package hostnet

import (
	"errors"
	"fmt"
	"net"
	"sort"

	"github.com/vishvananda/netlink"
)

// dumpTries bounds the retries of an interrupted netlink dump.
const dumpTries = 10

// dump runs a netlink dump again while the kernel reports it interrupted
// (NLM_F_DUMP_INTR, netlink.ErrDumpInterrupted: the table changed during
// the dump, as when QEMU adds its tap or networkd reacts to a new link,
// and the results may be incomplete), up to dumpTries times; a table
// that never holds still is an error.
func dump[T any](list func() (T, error)) (T, error) {
	var v T
	var err error
	for range dumpTries {
		if v, err = list(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, err
		}
	}
	return v, err
}

// NetlinkOps implements LinkOps with github.com/vishvananda/netlink.
type NetlinkOps struct{}

// Links lists every link with its IPv4 addresses, sorted by name.
func (NetlinkOps) Links() ([]LinkInfo, error) {
	links, err := dump(netlink.LinkList)
	if err != nil {
		return nil, fmt.Errorf("listing links: %w", err)
	}
	byIndex := map[int]string{}
	for _, l := range links {
		byIndex[l.Attrs().Index] = l.Attrs().Name
	}
	out := make([]LinkInfo, 0, len(links))
	for _, l := range links {
		a := l.Attrs()
		li := LinkInfo{Name: a.Name, Index: a.Index, Kind: l.Type(), MAC: a.HardwareAddr.String(), Alias: a.Alias,
			Up: a.Flags&net.FlagUp != 0, Addrs: []string{}}
		if a.MasterIndex > 0 {
			li.Master = byIndex[a.MasterIndex]
		}
		addrs, err := dump(func() ([]netlink.Addr, error) { return netlink.AddrList(l, netlink.FAMILY_V4) })
		if err != nil {
			return nil, fmt.Errorf("listing addresses of %s: %w", a.Name, err)
		}
		for _, ad := range addrs {
			li.Addrs = append(li.Addrs, ad.IPNet.String())
		}
		sort.Strings(li.Addrs)
		out = append(out, li)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Routes lists IPv4 routes of every table with a destination, sorted.
func (NetlinkOps) Routes() ([]RouteInfo, error) {
	routes, err := dump(func() ([]netlink.Route, error) {
		return netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: 0}, netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return nil, fmt.Errorf("listing routes: %w", err)
	}
	names := map[int]string{}
	if links, err := dump(netlink.LinkList); err == nil {
		for _, l := range links {
			names[l.Attrs().Index] = l.Attrs().Name
		}
	}
	out := []RouteInfo{}
	for _, r := range routes {
		if r.Dst == nil {
			continue
		}
		ones, _ := r.Dst.Mask.Size()
		if ones == 0 {
			continue
		}
		out = append(out, RouteInfo{Dst: r.Dst.String(), Dev: names[r.LinkIndex]})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Dst != out[j].Dst {
			return out[i].Dst < out[j].Dst
		}
		return out[i].Dev < out[j].Dev
	})
	return out, nil
}

// AddBridge creates a bridge link (STP off, the kernel default) with the
// hardware address mac, set in the creating request itself; the kernel
// ignores IFLA_IFALIAS there, so the alias is set right after.
func (NetlinkOps) AddBridge(name, mac, alias string) error {
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return fmt.Errorf("bridge %s: %w", name, err)
	}
	la := netlink.NewLinkAttrs()
	la.Name, la.HardwareAddr = name, hw
	br := &netlink.Bridge{LinkAttrs: la}
	if err := netlink.LinkAdd(br); err != nil {
		return fmt.Errorf("creating bridge %s: %w", name, err)
	}
	if alias != "" {
		if err := netlink.LinkSetAlias(br, alias); err != nil {
			return fmt.Errorf("setting the alias of bridge %s: %w", name, err)
		}
	}
	return nil
}

// DelLinkIndex deletes the link with this ifindex.
func (NetlinkOps) DelLinkIndex(index int) error {
	l, err := netlink.LinkByIndex(index)
	if err != nil {
		return fmt.Errorf("finding ifindex %d: %w", index, err)
	}
	if err := netlink.LinkDel(l); err != nil {
		return fmt.Errorf("deleting %s (ifindex %d): %w", l.Attrs().Name, index, err)
	}
	return nil
}

// AddAddr adds an address (CIDR form) to the link.
func (NetlinkOps) AddAddr(link, cidr string) error {
	l, err := netlink.LinkByName(link)
	if err != nil {
		return fmt.Errorf("finding %s: %w", link, err)
	}
	a, err := netlink.ParseAddr(cidr)
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(l, a); err != nil {
		return fmt.Errorf("adding %s to %s: %w", cidr, link, err)
	}
	return nil
}

// DelAddr removes an address (CIDR form) from the link.
func (NetlinkOps) DelAddr(link, cidr string) error {
	l, err := netlink.LinkByName(link)
	if err != nil {
		return fmt.Errorf("finding %s: %w", link, err)
	}
	a, err := netlink.ParseAddr(cidr)
	if err != nil {
		return err
	}
	if err := netlink.AddrDel(l, a); err != nil {
		return fmt.Errorf("removing %s from %s: %w", cidr, link, err)
	}
	return nil
}

// SetUp brings the link up.
func (NetlinkOps) SetUp(link string) error {
	l, err := netlink.LinkByName(link)
	if err != nil {
		return fmt.Errorf("finding %s: %w", link, err)
	}
	if err := netlink.LinkSetUp(l); err != nil {
		return fmt.Errorf("bringing %s up: %w", link, err)
	}
	return nil
}
