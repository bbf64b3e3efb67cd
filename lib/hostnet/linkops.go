package hostnet

// LinkInfo is one network interface as observed.
type LinkInfo struct {
	Name   string   `json:"name"`
	Index  int      `json:"ifindex,omitempty"` // the kernel's ifindex in this network namespace
	Kind   string   `json:"kind"`              // netlink type: bridge, tuntap, dummy, device, veth, …
	MAC    string   `json:"mac,omitempty"`     // hardware address, lower-case colon form
	Alias  string   `json:"alias,omitempty"`   // IFLA_IFALIAS ("ip link set NAME alias …")
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
	// AddBridge creates bridge name with hardware address mac (colon form)
	// and, when alias is not "", sets its IFLA_IFALIAS.
	AddBridge(name, mac, alias string) error
	// DelLinkIndex deletes the link with this ifindex (never by name, so a
	// link renamed or replaced after Barn's identity check is not hit).
	DelLinkIndex(index int) error
	AddAddr(link, cidr string) error
	DelAddr(link, cidr string) error
	SetUp(link string) error
}
