package guest

import (
	"bytes"
	"fmt"
	"strings"
)

// AnsibleHost is one node in the Ansible connection export.
type AnsibleHost struct {
	Address      string // the inventory address (Pigsty hosts are keyed by it)
	Host         string // ansible_host: where to connect (the address, or 127.0.0.1)
	Port         int    // ansible_port: 22 on the address, or the management port
	User         string
	IdentityFile string
	KnownHosts   string
	HostKeyAlias string
}

// RenderAnsibleInventory returns a YAML inventory that only sets
// connection variables (ansible_host, ansible_port, ansible_user,
// ansible_ssh_private_key_file, ansible_ssh_common_args) for each host
// keyed by its inventory address, so
//
//	ansible -i pigsty.yml -i barn-hosts.yml all -m ping
//
// merges them into the Pigsty inventory's hosts and reaches every node with
// the deployment key, the login user and Barn's known_hosts under the
// instance's HostKeyAlias — on Host:Port, which is either the fixed private
// address (port 22, from a host or namespace that routes to the private
// /24) or the management port forward on 127.0.0.1.
func RenderAnsibleInventory(hosts []AnsibleHost) []byte {
	if len(hosts) == 0 {
		return []byte("all:\n  hosts: {}\n")
	}
	var b bytes.Buffer
	b.WriteString("# Connection variables for the Barn lab; use together with the Pigsty inventory:\n")
	b.WriteString("#   ansible -i pigsty.yml -i THIS_FILE all -m ping\n")
	b.WriteString("all:\n  hosts:\n")
	for _, h := range hosts {
		args := strings.Join([]string{
			"-o IdentitiesOnly=yes",
			"-o StrictHostKeyChecking=accept-new",
			"-o UserKnownHostsFile=" + h.KnownHosts,
			"-o HostKeyAlias=" + h.HostKeyAlias,
		}, " ")
		host, port := h.Host, h.Port
		if host == "" {
			host = h.Address
		}
		if port == 0 {
			port = 22
		}
		fmt.Fprintf(&b, "    %q:\n", h.Address)
		fmt.Fprintf(&b, "      ansible_host: %q\n", host)
		fmt.Fprintf(&b, "      ansible_port: %d\n", port)
		fmt.Fprintf(&b, "      ansible_user: %q\n", h.User)
		fmt.Fprintf(&b, "      ansible_ssh_private_key_file: %q\n", h.IdentityFile)
		fmt.Fprintf(&b, "      ansible_ssh_common_args: %q\n", args)
	}
	return b.Bytes()
}
