package spec

import (
	"fmt"
	"net/netip"
	"strings"
)

// FieldError is a spec field that breaks its rule: Field is its path in
// the document ("nodes[pg-1].cpus", "deployment.user.name"), Value the
// offending value.
type FieldError struct {
	Field string
	Value any
	*Violation
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s = %s: %s", e.Field, valueText(e.Value), e.Problem)
}

func valueText(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprint(v)
}

func field(f string, v any, viol *Violation) *FieldError {
	if viol == nil {
		return nil
	}
	return &FieldError{Field: f, Value: v, Violation: viol}
}

// DiskName derives a data disk's identity from its mount path: "/data" →
// "data", "/pg/data" → "pg-data".
func DiskName(mount string) string {
	return strings.ReplaceAll(strings.Trim(mount, "/"), "/", "-")
}

// Validate checks every rule of a resolved spec that barn-inventory
// guarantees: the schema, the deployment envelope, 1–MaxNodes nodes, each
// node's fields (ValidateNode), names and aliases unique across nodes,
// unique addresses, and exactly one control node named by Control. It
// returns the first violation in document order, nil when the spec is
// valid. Hashes are not its concern (Seal makes them; barn-plan checks
// them).
func (s *Spec) Validate() *FieldError {
	if s.Schema != Schema {
		return field("schema", s.Schema, violation("want "+Schema, "re-run barn-inventory resolve"))
	}
	if err := s.Deployment.Validate(); err != nil {
		return err
	}
	if len(s.Nodes) == 0 || len(s.Nodes) > MaxNodes {
		return field("nodes", len(s.Nodes), violation(fmt.Sprintf("want 1 to %d nodes", MaxNodes), "mark the extra hosts vm_skip: true or split the inventory"))
	}
	names := map[string]string{}
	addrs := map[string]string{}
	control := ""
	for _, n := range s.Nodes {
		if err := ValidateNode(s.Deployment, n); err != nil {
			return err
		}
		at := "nodes[" + n.Name + "]"
		for i, name := range append([]string{n.Name}, n.Aliases...) {
			f := at + ".name"
			if i > 0 {
				f = fmt.Sprintf("%s.aliases[%d]", at, i-1)
			}
			if other, dup := names[name]; dup {
				return field(f, name, violation("duplicates a name or alias of node "+other, "names and aliases must be unique"))
			}
			names[name] = n.Name
		}
		if other, dup := addrs[n.Address]; dup {
			return field(at+".address", n.Address, violation("is also the address of node "+other, "give every host its own address"))
		}
		addrs[n.Address] = n.Name
		if n.Control {
			if control != "" {
				return field(at+".control", true, violation("node "+control+" is the control node too", "re-run barn-inventory resolve: exactly one node is the control node"))
			}
			control = n.Name
		}
	}
	if control == "" || s.Control != control {
		return field("control", s.Control, violation(fmt.Sprintf("the control node is %q", control), "re-run barn-inventory resolve: exactly one node is the control node"))
	}
	return nil
}

// Validate checks the deployment envelope: the constant name, the
// architecture, a private /24 with .1 the host, .2–.8 reserved and
// .9–.254 the pool, and the login user (CheckUserName, CheckUID).
func (d Deployment) Validate() *FieldError {
	if d.Name != DeploymentName {
		return field("deployment.name", d.Name, violation("want "+DeploymentName, "re-run barn-inventory resolve"))
	}
	if err := field("deployment.arch", d.Arch, CheckArch(d.Arch)); err != nil {
		return err
	}
	if err := d.Subnet.validate(); err != nil {
		return err
	}
	if err := field("deployment.user.name", d.User.Name, CheckUserName(d.User.Name)); err != nil {
		return err
	}
	return field("deployment.user.uid", d.User.UID, CheckUID(d.User.Name, d.User.UID))
}

func (sn Subnet) validate() *FieldError {
	p, err := netip.ParsePrefix(sn.CIDR)
	if err != nil || !p.Addr().Is4() || p.Bits() != 24 || p.Masked() != p || !p.Addr().IsPrivate() {
		return field("deployment.subnet.cidr", sn.CIDR, violation("want a canonical private IPv4 /24", "use 10.x, 172.16–31.x or 192.168.x addresses, e.g. 10.10.10.0/24"))
	}
	at := func(last byte) string {
		b := p.Addr().As4()
		b[3] = last
		return netip.AddrFrom4(b).String()
	}
	for _, f := range []struct{ name, got, want string }{
		{"deployment.subnet.host", sn.Host, at(1)},
		{"deployment.subnet.reserved", sn.Reserved, at(2) + "-" + at(8)},
		{"deployment.subnet.pool", sn.Pool, at(9) + "-" + at(254)},
	} {
		if f.got != f.want {
			return field(f.name, f.got, violation("want "+f.want, "re-run barn-inventory resolve"))
		}
	}
	return nil
}

// ValidateNode checks one node under deployment d: its name; an address
// in the subnet's pool; two distinct well-formed MACs; cpus, memory and
// root disk size; each data disk (name derived from a valid mount, size,
// filesystem, serial; names and mounts not overlapping); each alias; at
// most MaxShares shares (host and guest paths, tag; targets overlapping
// neither a disk nor each other); and no disk or share over the login
// user's ~/.ssh.
func ValidateNode(d Deployment, n Node) *FieldError {
	at := "nodes[" + n.Name + "]"
	if err := validateIdentity(d, n, at); err != nil {
		return err
	}
	if err := field(at+".cpus", n.CPUs, CheckCPUs(n.CPUs)); err != nil {
		return err
	}
	if err := field(at+".memory_bytes", n.MemoryBytes, CheckMemory(n.MemoryBytes)); err != nil {
		return err
	}
	if err := field(at+".root_disk_bytes", n.RootDiskBytes, CheckDiskSize(n.RootDiskBytes)); err != nil {
		return err
	}
	ssh := "/home/" + d.User.Name + "/.ssh"
	var mounts []string
	for i, dk := range n.Disks {
		df := fmt.Sprintf("%s.disks[%d]", at, i)
		if err := validateDisk(dk, df, ssh, mounts); err != nil {
			return err
		}
		mounts = append(mounts, dk.Mount)
	}
	for i, a := range n.Aliases {
		if err := field(fmt.Sprintf("%s.aliases[%d]", at, i), a, CheckAlias(a)); err != nil {
			return err
		}
	}
	if len(n.Shares) > MaxShares {
		return field(at+".shares", len(n.Shares), violation(fmt.Sprintf("at most %d shares per node", MaxShares), "merge shares into fewer directories"))
	}
	for i, sh := range n.Shares {
		sf := fmt.Sprintf("%s.shares[%d]", at, i)
		if err := validateShare(sh, sf, ssh, mounts); err != nil {
			return err
		}
		mounts = append(mounts, sh.Guest)
	}
	return nil
}

// validateIdentity checks node n's name, FQDN, pool address and MACs (at
// is its field path).
func validateIdentity(d Deployment, n Node, at string) *FieldError {
	if err := field(at+".name", n.Name, CheckNodeName(n.Name)); err != nil {
		return err
	}
	if err := field(at+".fqdn", n.FQDN, CheckFQDN(n.Name, n.FQDN)); err != nil {
		return err
	}
	addr, viol := checkIPv4(n.Address)
	if viol != nil {
		return field(at+".address", n.Address, viol)
	}
	if p, err := netip.ParsePrefix(d.Subnet.CIDR); err != nil || !p.Contains(addr) || addr.As4()[3] < 9 || addr.As4()[3] > 254 {
		return field(at+".address", n.Address, violation("is not in the pool "+d.Subnet.Pool, "nodes use .9–.254 of the deployment's /24"))
	}
	for _, m := range []struct{ f, v string }{{".mac.management", n.MAC.Management}, {".mac.private", n.MAC.Private}} {
		if err := field(at+m.f, m.v, CheckMAC(m.v)); err != nil {
			return err
		}
	}
	if n.MAC.Management == n.MAC.Private {
		return field(at+".mac.private", n.MAC.Private, violation("equals the management MAC", "re-run barn-inventory resolve"))
	}
	return nil
}

// validateDisk checks data disk dk (field path df): its own fields, and a
// mount apart from ~/.ssh (ssh) and from the earlier mounts.
func validateDisk(dk Disk, df, ssh string, mounts []string) *FieldError {
	if err := field(df+".mount", dk.Mount, CheckGuestPath(dk.Mount)); err != nil {
		return err
	}
	if err := field(df+".name", dk.Name, CheckDiskName(dk.Name)); err != nil {
		return err
	}
	if dk.Name != DiskName(dk.Mount) {
		return field(df+".name", dk.Name, violation("is not derived from the mount "+dk.Mount, "re-run barn-inventory resolve"))
	}
	if err := field(df+".size_bytes", dk.SizeBytes, CheckDiskSize(dk.SizeBytes)); err != nil {
		return err
	}
	if err := field(df+".fs", dk.FS, CheckFS(dk.FS)); err != nil {
		return err
	}
	if err := field(df+".size_bytes", dk.SizeBytes, CheckDataDiskFits(dk.SizeBytes, dk.FS)); err != nil {
		return err
	}
	if err := field(df+".serial", dk.Serial, CheckDiskSerial(dk.Serial)); err != nil {
		return err
	}
	if Overlaps(dk.Mount, ssh) {
		return field(df+".mount", dk.Mount, violation("overlaps "+ssh, "mount data disks elsewhere, e.g. /data"))
	}
	for _, o := range mounts {
		if Overlaps(o, dk.Mount) {
			return field(df+".mount", dk.Mount, violation("overlaps data disk "+o, "give each disk its own, non-nested mount"))
		}
	}
	return nil
}

// validateShare checks share sh (field path sf): its own fields, and a
// guest target apart from ~/.ssh (ssh) and from the data disks' and
// earlier shares' mounts.
func validateShare(sh Share, sf, ssh string, mounts []string) *FieldError {
	if err := field(sf+".host", sh.Host, CheckHostPath(sh.Host)); err != nil {
		return err
	}
	if err := field(sf+".guest", sh.Guest, CheckGuestPath(sh.Guest)); err != nil {
		return err
	}
	if err := field(sf+".tag", sh.Tag, CheckShareTag(sh.Tag)); err != nil {
		return err
	}
	if Overlaps(sh.Guest, ssh) {
		return field(sf+".guest", sh.Guest, violation("overlaps "+ssh, "share into another directory"))
	}
	for _, o := range mounts {
		if Overlaps(o, sh.Guest) {
			return field(sf+".guest", sh.Guest, violation("overlaps "+o, "give each share its own target, apart from the data disks"))
		}
	}
	return nil
}
