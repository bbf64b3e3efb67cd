package guest

import (
	"bytes"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"barn.dev/lib/quote"
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
// ansible_ssh_common_args) for each host keyed by its inventory address,
// so
//
//	ansible -i pigsty.yml -i barn-hosts.yml all -m ping
//
// merges them into the Pigsty inventory's hosts and reaches every node with
// the deployment key, the login user and Barn's known_hosts under the
// instance's HostKeyAlias — on Host:Port, which is either the fixed private
// address (port 22, from a host or namespace that routes to the private
// /24) or the management port forward on 127.0.0.1.
//
// The ssh arguments are sshArgs, written for Ansible's reader of them
// (Python's shlex.split, so quote.ShellIfNeeded words) around ssh's reader
// of each -o value (quote.SSHWord/SSHPath). The key goes there too, not in
// ansible_ssh_private_key_file, which Ansible hands to ssh as
// IdentityFile="PATH" without escaping '"' or '%'. Every string is a
// double-quoted YAML scalar (quote.YAMLNode), tagged !unsafe when it holds
// a '{' so that Ansible never evaluates a "{{", "{%" or "{#" in a path as
// Jinja2. A value the syntaxes cannot carry is a usage error naming it.
func RenderAnsibleInventory(hosts []AnsibleHost) ([]byte, error) {
	entries := &yaml.Node{Kind: yaml.MappingNode}
	for _, h := range hosts {
		host, port := h.Host, h.Port
		if host == "" {
			host = h.Address
		}
		if port == 0 {
			port = 22
		}
		args, err := sshArgs(h, host)
		if err != nil {
			return nil, err
		}
		vars := &yaml.Node{Kind: yaml.MappingNode}
		for _, kv := range [][2]*yaml.Node{
			{scalar("ansible_host"), unsafe(host)},
			{scalar("ansible_port"), {Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(port)}},
			{scalar("ansible_user"), unsafe(h.User)},
			{scalar("ansible_ssh_common_args"), unsafe(args)},
		} {
			vars.Content = append(vars.Content, kv[0], kv[1])
		}
		entries.Content = append(entries.Content, quote.YAMLNode(h.Address, ""), vars)
	}
	if len(hosts) == 0 {
		entries.Style = yaml.FlowStyle
	}
	doc := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
		scalar("all"), {Kind: yaml.MappingNode, Content: []*yaml.Node{scalar("hosts"), entries}},
	}}
	if len(hosts) > 0 {
		doc.HeadComment = "Connection variables for the Barn lab; use together with the Pigsty inventory:\n  ansible -i pigsty.yml -i THIS_FILE all -m ping"
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func scalar(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: s} }

// unsafe is s as a YAML string Ansible does not template.
func unsafe(s string) *yaml.Node {
	if strings.Contains(s, "{") {
		return quote.YAMLNode(s, "!unsafe")
	}
	return quote.YAMLNode(s, "")
}

// sshArgs is ansible_ssh_common_args for h: no ssh_config is read (-F
// /dev/null, as for barn-node ssh), and every option Barn relies on is
// given. Ansible's own -o User/Port (from ansible_user/ansible_port) and
// its connection sharing (ControlMaster=auto, ControlPersist, a ControlPath
// under ~/.ansible/cp, keyed by host, port and user) come first on its ssh
// command line and stay: with no ssh_config read, nothing of the user's
// can change them.
func sshArgs(h AnsibleHost, host string) (string, error) {
	key, err := quote.SSHPath(h.IdentityFile)
	if err != nil {
		return "", err
	}
	known, err := quote.SSHPath(h.KnownHosts)
	if err != nil {
		return "", err
	}
	hostName, err := quote.SSHWord(host)
	if err != nil {
		return "", err
	}
	alias, err := quote.SSHWord(h.HostKeyAlias)
	if err != nil {
		return "", err
	}
	words := []string{"-F", "/dev/null"}
	for _, o := range []string{
		"HostName=" + hostName,
		"IdentityFile=" + key,
		"IdentitiesOnly=yes",
		"UserKnownHostsFile=" + known,
		"GlobalKnownHostsFile=none",
		"HostKeyAlias=" + alias,
		"StrictHostKeyChecking=accept-new",
		"CheckHostIP=no",
		"UpdateHostKeys=no",
		"ProxyJump=none",
		"ProxyCommand=none",
		"CanonicalizeHostname=no",
	} {
		words = append(words, "-o", quote.ShellIfNeeded(o))
	}
	return strings.Join(words, " "), nil
}
