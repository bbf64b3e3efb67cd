package guest

import (
	"bytes"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"barn.dev/lib/exitcode"
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

// ansibleSSHArgs is the export's ssh_args (the ssh connection plugin's
// option ssh_args, first on every ssh, sftp and scp command line it runs,
// where ssh keeps the first value of each option): an ansible_ssh_args of
// the user's (or ssh_args in ansible.cfg) cannot put options ahead of
// Barn's, and lab traffic never shares a connection. ansible-core's
// default is "-C -o ControlMaster=auto -o ControlPersist=60s", with a
// ControlPath it adds from control_path/control_path_dir, which
// ansible.cfg, ANSIBLE_SSH_CONTROL_PATH(_DIR) or a variable can point at
// the socket of a master the user keeps open to a production host of the
// same address, port and user: ssh would then send the lab's session
// through that master, whatever else the command line says. With
// ControlPath=none on the line the plugin adds no ControlPath of its own
// (ssh.py _persistence_controls) and ssh neither uses nor makes a master.
// The cost: every task opens its own ssh connection.
const ansibleSSHArgs = "-C -o ControlMaster=no -o ControlPath=none"

// AnsibleConnectionVars lists, in the order the export writes them, every
// inventory variable through which ansible-core's ssh connection plugin
// (ansible.builtin.ssh, its documented vars) or the play context
// (ansible_connection) chooses where, as whom, with which key, pins and
// programs a host is reached. The export sets every one of them for every
// host, because:
//
//   - of two names for one option (ansible_host and ansible_ssh_host) the
//     plugin uses the one it lists last whatever level set it, so Barn sets
//     both names, not only the first;
//   - a variable beats ansible.cfg, ANSIBLE_* environment and the command
//     line (-u, --private-key, -c, --ssh-*-args), and the export's host
//     entries beat every group and all.vars level, group_vars/ included,
//     and the Pigsty inventory's own host entries when the export is named
//     after it (ansible -i pigsty.yml -i barn-hosts.yml);
//   - ansible_connection is the ssh plugin by its full name
//     (ansible.builtin.ssh; "ssh" names the same plugin), so no
//     paramiko, local or other plugin of the user's reads these values;
//   - ansible_control_path "none" and ansible_control_path_dir
//     "~/.ansible/cp" (Ansible's default) are Barn's too, although the
//     plugin never reads them while ssh_args holds ControlPath=none (see
//     ansibleSSHArgs): a user's value is refused where it would win;
//   - only host_vars/ files (and play vars, -e, set_fact, which no
//     inventory can see) outrank it: inventory.ConnectionOverrides finds
//     the host_vars/ definitions of AnsibleDecidingVars, and the export
//     refuses them.
//
// Deliberately not set: ansible_password and its aliases, ansible_become*
// (no become method changes the ssh login: host, port, user, key and
// route stay these), and timeouts, retries, pipelining and the transfer
// method, which change how long or how, never where.
func AnsibleConnectionVars() []string {
	var out []string
	for _, o := range ansibleOptions {
		out = append(out, o...)
	}
	return out
}

// ansibleOptions groups AnsibleConnectionVars by the option they set, in
// the order the plugin lists an option's variables (config/manager.py
// _loop_entries: of the names a host defines, the last listed wins,
// whatever precedence level each comes from).
var ansibleOptions = [][]string{
	{"ansible_connection"},
	{"ansible_host", "ansible_ssh_host"},
	{"ansible_port", "ansible_ssh_port"},
	{"ansible_user", "ansible_ssh_user"},
	{"ansible_ssh_executable"}, {"ansible_sftp_executable"}, {"ansible_scp_executable"},
	{"ansible_ssh_args"}, {"ansible_ssh_common_args"},
	{"ansible_ssh_extra_args"}, {"ansible_sftp_extra_args"}, {"ansible_scp_extra_args"},
	{"ansible_private_key_file", "ansible_ssh_private_key_file"},
	{"ansible_host_key_checking", "ansible_ssh_host_key_checking"},
	{"ansible_ssh_pkcs11_provider"},
	{"ansible_control_path"}, {"ansible_control_path_dir"},
}

// AnsibleDecidingVars are the connection variables a host_vars/ file can
// use to beat the export: of each option's names, the one the plugin
// reads last. A user's ansible_host in host_vars/ outranks the export's
// ansible_host, yet the plugin still connects to the export's
// ansible_ssh_host, listed after it.
func AnsibleDecidingVars() []string {
	out := make([]string, len(ansibleOptions))
	for i, o := range ansibleOptions {
		out[i] = o[len(o)-1]
	}
	return out
}

// AnsibleGroup is the export's one group: every host it sets, and only
// those, so that a run limited to it (ansible ... barn_lab, or
// ansible-playbook -l barn_lab) reaches no host the export does not cover.
const AnsibleGroup = "barn_lab"

// AnsibleUnparsedFatal is the setting the export's commands run with:
// Ansible only warns about an inventory source it cannot parse and goes on
// without it (the Pigsty inventory alone: production's connection
// settings), unless this makes that fatal (INVENTORY_ANY_UNPARSED_IS_FAILED).
const AnsibleUnparsedFatal = "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED=1"

// RenderAnsibleInventory returns a YAML inventory that puts each host,
// keyed by its inventory address, into the group AnsibleGroup with every
// variable of AnsibleConnectionVars and nothing else, so that
//
//	ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED=1 ansible -i pigsty.yml -i barn-hosts.yml barn_lab -m ping
//
// merges them into the Pigsty inventory's hosts and reaches every node with
// the deployment key, the login user and Barn's known_hosts under the
// instance's HostKeyAlias — on Host:Port, which is either the fixed private
// address (port 22, from a host or namespace that routes to the private
// /24) or the management port forward on 127.0.0.1. The programs are ssh,
// sftp and scp from PATH, the extra arguments, private key file and
// PKCS#11 provider are empty (the key is in the common arguments), host
// key checking is on and no ssh connection is shared (ansibleSSHArgs).
//
// The file fails closed: the group's hosts are one flow mapping, a host
// with its variables a line, closed by the last line's "}", so a file cut
// after "hosts: {" does not parse (fatal with AnsibleUnparsedFatal, which
// the header's commands set), and one cut before it — empty included,
// which Ansible's ini plugin reads as no hosts — has no host in
// AnsibleGroup, so a run limited to it reaches nothing.
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
	var b bytes.Buffer
	b.WriteString("# Connection variables for the Barn lab. Name this file after the Pigsty inventory,\n" +
		"# limit every run to the group " + AnsibleGroup + " and make an unparsed inventory fatal:\n" +
		"#   " + AnsibleUnparsedFatal + " ansible -i pigsty.yml -i THIS_FILE " + AnsibleGroup + " -m ping\n" +
		"#   " + AnsibleUnparsedFatal + " ansible-playbook -i pigsty.yml -i THIS_FILE -l " + AnsibleGroup + " PLAYBOOK\n" +
		"all:\n  children:\n    " + AnsibleGroup + ":\n      hosts: {")
	for i, h := range hosts {
		vars, err := ansibleVars(h)
		if err != nil {
			return nil, err
		}
		vars.Style = yaml.FlowStyle
		line, err := flowLine(quote.YAMLNode(h.Address, ""), vars)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n        " + line)
	}
	if len(hosts) > 0 {
		b.WriteString("\n        ")
	}
	b.WriteString("}\n")
	return b.Bytes(), nil
}

// flowLine is `KEY: {VALUE}` on one line, as yaml.v3 writes a one-entry
// flow mapping (it does not fold long flow lines).
func flowLine(key, value *yaml.Node) (string, error) {
	out, err := yaml.Marshal(&yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle, Content: []*yaml.Node{key, value}})
	if err != nil {
		return "", err
	}
	line := strings.TrimSuffix(string(out), "\n")
	if !strings.HasPrefix(line, "{") || !strings.HasSuffix(line, "}") || strings.Contains(line, "\n") {
		return "", exitcode.New(exitcode.Runtime, "yaml.v3 wrote a flow mapping over several lines: %q", line)
	}
	return line[1 : len(line)-1], nil
}

// ansibleVars is h's mapping of AnsibleConnectionVars, in that order.
func ansibleVars(h AnsibleHost) (*yaml.Node, error) {
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
	portNode := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(port)}
	yes := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"}
	values := map[string]*yaml.Node{
		"ansible_connection": unsafe("ansible.builtin.ssh"),
		"ansible_host":       unsafe(host), "ansible_ssh_host": unsafe(host),
		"ansible_port": portNode, "ansible_ssh_port": portNode,
		"ansible_user": unsafe(h.User), "ansible_ssh_user": unsafe(h.User),
		"ansible_ssh_executable": unsafe("ssh"), "ansible_sftp_executable": unsafe("sftp"), "ansible_scp_executable": unsafe("scp"),
		"ansible_ssh_args": unsafe(ansibleSSHArgs), "ansible_ssh_common_args": unsafe(args),
		"ansible_host_key_checking": yes, "ansible_ssh_host_key_checking": yes,
		"ansible_control_path": unsafe("none"), "ansible_control_path_dir": unsafe("~/.ansible/cp"),
	}
	vars := &yaml.Node{Kind: yaml.MappingNode}
	for _, k := range AnsibleConnectionVars() {
		v := values[k]
		if v == nil {
			v = unsafe("") // extra args, private key files, PKCS#11 provider
		}
		vars.Content = append(vars.Content, scalar(k), v)
	}
	return vars, nil
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
// the export's ssh_args (ControlPath=none) come first on its ssh command
// line and stay: with no ssh_config read, nothing of the user's can change
// them.
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
