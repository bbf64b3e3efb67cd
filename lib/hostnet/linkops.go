package hostnet

import (
	"fmt"
	"net"
	"sort"

	"github.com/vishvananda/netlink"
)

// LinkInfo is one network interface as observed.
type LinkInfo struct {
	Name   string   `json:"name"`
	Kind   string   `json:"kind"` // netlink type: bridge, tuntap, dummy, device, veth, …
	Up     bool     `json:"up"`
	Master string   `json:"master,omitempty"` // bridge this link is attached to
	Addrs  []string `json:"addrs"`            // IPv4 addresses in CIDR form, sorted
}

// RouteInfo is one IPv4 route with a destination prefix (default routes are
// not listed).
type RouteInfo struct {
	Dst string `json:"dst"`
	Dev string `json:"dev"`
}

// LinkOps is the link/address/route surface the netlink backend needs. All
// operations act on the calling process's network namespace.
type LinkOps interface {
	Links() ([]LinkInfo, error)
	Routes() ([]RouteInfo, error)
	AddBridge(name string) error
	DelLink(name string) error
	AddAddr(link, cidr string) error
	DelAddr(link, cidr string) error
	SetUp(link string) error
}

// NetlinkOps implements LinkOps with github.com/vishvananda/netlink.
type NetlinkOps struct{}

// Links lists every link with its IPv4 addresses, sorted by name.
func (NetlinkOps) Links() ([]LinkInfo, error) {
	links, err := netlink.LinkList()
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
		li := LinkInfo{Name: a.Name, Kind: l.Type(), Up: a.Flags&net.FlagUp != 0, Addrs: []string{}}
		if a.MasterIndex > 0 {
			li.Master = byIndex[a.MasterIndex]
		}
		addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
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
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: 0}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("listing routes: %w", err)
	}
	names := map[int]string{}
	if links, err := netlink.LinkList(); err == nil {
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

// AddBridge creates a bridge link (STP off, the kernel default).
func (NetlinkOps) AddBridge(name string) error {
	la := netlink.NewLinkAttrs()
	la.Name = name
	if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: la}); err != nil {
		return fmt.Errorf("creating bridge %s: %w", name, err)
	}
	return nil
}

// DelLink deletes the link.
func (NetlinkOps) DelLink(name string) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("finding %s: %w", name, err)
	}
	if err := netlink.LinkDel(l); err != nil {
		return fmt.Errorf("deleting %s: %w", name, err)
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
