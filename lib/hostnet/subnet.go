package hostnet

import (
	"fmt"
	"net/netip"
)

// Subnet is a canonical RFC1918 IPv4 /24: .1 is the host (bridge) address,
// .2–.8 are reserved, .9–.254 are node addresses.
type Subnet struct{ Prefix netip.Prefix }

// ParseSubnet parses "a.b.c.0/24". It returns an error naming the value when
// the text is not a canonical /24 inside 10/8, 172.16/12 or 192.168/16.
func ParseSubnet(s string) (Subnet, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return Subnet{}, fmt.Errorf("cidr %q: %v", s, err)
	}
	if !p.Addr().Is4() || p.Bits() != 24 {
		return Subnet{}, fmt.Errorf("cidr %q: must be an IPv4 /24", s)
	}
	if p.Masked() != p {
		return Subnet{}, fmt.Errorf("cidr %q: not canonical; did you mean %s?", s, p.Masked())
	}
	if !p.Addr().IsPrivate() {
		return Subnet{}, fmt.Errorf("cidr %q: not an RFC1918 private network (10/8, 172.16/12, 192.168/16)", s)
	}
	return Subnet{Prefix: p}, nil
}

// String is the canonical CIDR text.
func (s Subnet) String() string { return s.Prefix.String() }

// HostAddr is the .1 address.
func (s Subnet) HostAddr() netip.Addr {
	b := s.Prefix.Addr().As4()
	b[3] = 1
	return netip.AddrFrom4(b)
}

// HostCIDR is "<.1>/24", the address put on the bridge.
func (s Subnet) HostCIDR() string { return netip.PrefixFrom(s.HostAddr(), 24).String() }

// DHCPEnd is the last reserved address (.8).
func (s Subnet) DHCPEnd() netip.Addr {
	b := s.Prefix.Addr().As4()
	b[3] = 8
	return netip.AddrFrom4(b)
}

// Candidates is the small fixed list of /24s proposed for a generated
// (untouched default) inventory, in order of preference.
var Candidates = []string{
	"10.10.10.0/24", "10.10.20.0/24", "10.10.30.0/24", "10.10.40.0/24",
	"172.30.10.0/24", "192.168.210.0/24",
}

// Propose returns the first candidate that overlaps none of inUse (prefixes
// seen on host interfaces and routes), and false when all are taken.
func Propose(inUse []netip.Prefix) (string, bool) {
	for _, c := range Candidates {
		p := netip.MustParsePrefix(c)
		free := true
		for _, u := range inUse {
			if u.Bits() > 0 && u.Overlaps(p) {
				free = false
				break
			}
		}
		if free {
			return c, true
		}
	}
	return "", false
}
