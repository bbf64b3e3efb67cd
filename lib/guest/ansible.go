package guest

import (
	"bytes"
	"fmt"
	"strings"
)

// AnsibleHost is one node in the Ansible connection export.
type AnsibleHost struct {
	Address      string // the inventory address (Pigsty hosts are keyed by it)
	User         string
	IdentityFile string
	KnownHosts   string
	HostKeyAlias string
}

// RenderAnsibleInventory returns a YAML inventory that only sets
// connection variables for each host keyed by its inventory address, so
//
//	ansible -i pigsty.yml -i barn-hosts.yml all -m ping
//
// merges them into the Pigsty inventory's hosts and reaches every node on
// its fixed private address (from a host or namespace that routes to the
// private /24) with the deployment key, the login user and Barn's
// known_hosts under the instance's HostKeyAlias.
func RenderAnsibleInventory(hosts []AnsibleHost) []byte {
	var b bytes.Buffer
	b.WriteString("# Connection variables for the Barn lab; use together with the Pigsty inventory:\n")
	b.WriteString("#   ansible -i pigsty.yml -i THIS_FILE all -m ping\n")
	b.WriteString("all:\n  hosts:\n")
	if len(hosts) == 0 {
		b.Reset()
		b.WriteString("all:\n  hosts: {}\n")
		return b.Bytes()
	}
	for _, h := range hosts {
		args := strings.Join([]string{
			"-o IdentitiesOnly=yes",
			"-o StrictHostKeyChecking=accept-new",
			"-o UserKnownHostsFile=" + h.KnownHosts,
			"-o HostKeyAlias=" + h.HostKeyAlias,
		}, " ")
		fmt.Fprintf(&b, "    %q:\n", h.Address)
		fmt.Fprintf(&b, "      ansible_user: %q\n", h.User)
		fmt.Fprintf(&b, "      ansible_ssh_private_key_file: %q\n", h.IdentityFile)
		fmt.Fprintf(&b, "      ansible_ssh_common_args: %q\n", args)
	}
	return b.Bytes()
}
