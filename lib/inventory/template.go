package inventory

import (
	"fmt"
	"net/netip"
	"strings"

	"barn.dev/lib/exitcode"
)

// TemplateNames are the starting inventories `barn-inventory init` writes:
// 1, 2, 3 and 4 nodes. meta (at .10) is always the control node.
var TemplateNames = []string{"meta", "dual", "trio", "full"}

// Template returns the starting inventory name for the /24 cidr (e.g.
// "10.10.10.0/24"). It is a valid Pigsty inventory (all.children.{infra,
// etcd, pg-meta[, pg-test]}, all.vars.admin_ip) with modest vm_* values so
// the lab fits a small machine. Errors are usage class.
func Template(name, cidr string) ([]byte, error) {
	nodes := map[string]int{"meta": 1, "dual": 2, "trio": 3, "full": 4}[name]
	if nodes == 0 {
		return nil, exitcode.New(exitcode.Usage, "unknown template %q; choose one of %s", name, strings.Join(TemplateNames, ", ")).WithReason("unknown_template")
	}
	p, err := netip.ParsePrefix(cidr)
	if err != nil || !p.Addr().Is4() || p.Bits() != 24 || p.Masked() != p {
		return nil, exitcode.New(exitcode.Usage, "--cidr %q must be a canonical IPv4 /24 such as 10.10.10.0/24", cidr).WithReason("invalid_cidr")
	}
	b := p.Addr().As4()
	if !(b[0] == 10 || (b[0] == 172 && b[1] >= 16 && b[1] <= 31) || (b[0] == 192 && b[1] == 168)) {
		return nil, exitcode.New(exitcode.Usage, "--cidr %s is not a private (RFC 1918) network", cidr).WithReason("invalid_cidr")
	}
	ip := func(last byte) string { return netip.AddrFrom4([4]byte{b[0], b[1], b[2], last}).String() }
	mem := "1024"
	if name == "meta" {
		mem = "2048"
	}
	var w strings.Builder
	fmt.Fprintf(&w, `---
# Barn starting inventory %q (%d node%s), written by barn-inventory init.
# It is a Pigsty inventory: the same file drives ./deploy.yml inside the lab.
# Barn reads the host addresses, nodename/pg_cluster/pg_seq, admin_ip and the
# vm_* keys; everything else is Pigsty's.
#   barn-inventory resolve | barn-plan | barn-node apply

all:
  children:

    # infrastructure and the control node
    infra:
      hosts:
        %s: { infra_seq: 1 }
      vars:
        repo_enabled: false

    etcd:
      hosts:
        %s: { etcd_seq: 1 }
      vars:
        etcd_cluster: etcd

    pg-meta:
      hosts:
        %s: { pg_seq: 1, pg_role: primary }
      vars:
        pg_cluster: pg-meta
`, name, nodes, map[bool]string{true: "s", false: ""}[nodes > 1], ip(10), ip(10), ip(10))
	if nodes > 1 {
		w.WriteString(`
    pg-test:
      hosts:
`)
		for i := 1; i < nodes; i++ {
			role := "replica"
			if i == 1 {
				role = "primary"
			}
			fmt.Fprintf(&w, "        %s: { pg_seq: %d, pg_role: %s }\n", ip(byte(10+i)), i, role)
		}
		w.WriteString(`      vars:
        pg_cluster: pg-test
`)
	}
	fmt.Fprintf(&w, `
  vars:
    version: v4.5.0
    admin_ip: %s
    region: default
    node_admin_username: dba

    # Barn: the VMs (bare integers: MiB for vm_mem, GiB for disks)
    vm_image: d12
    vm_cpu: 2
    vm_mem: %s
    vm_disk: 32
    vm_disks:
      - { path: /data, size: 8GiB }
`, ip(10), mem)
	return []byte(w.String()), nil
}
