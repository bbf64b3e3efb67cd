//go:build linux

package guest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"barn.dev/lib/inventory"
	"barn.dev/lib/sshkeys"
)

// The decoy network: production's address is the lab's inventory address,
// reached the way a production inventory routes to it (through a bastion,
// on another port, as another user, with another key).
const (
	decoyProd    = "10.10.10.11"
	decoyBastion = "10.10.10.2"
	labPort      = 2222 // the management port forward the export names
	labAlias     = "barn-decoy-lab"
)

// TestAnsibleExportDecoyNetns is the export's contract proven live: in a
// network namespace of its own holding a decoy bastion sshd and a decoy
// "production" sshd at the lab's inventory address, and the lab VM's sshd
// (OpenSSH, the host key Barn pins, Barn's authorized key) on
// 127.0.0.1:2222, a production inventory's connection settings at every
// level Ansible reads either lose to the export — real `ansible -vvv`
// reaches only the lab sshd, with Barn's key and pins, and the decoys log
// no connection — or Barn refuses the export naming file:line. A control
// run without the export first proves the decoys answer and log.
func TestAnsibleExportDecoyNetns(t *testing.T) {
	if testing.Short() {
		t.Skip("real sshds and ansible in a network namespace: not in -short runs")
	}
	requireAnsible(t, "ansible", "ansible-playbook")
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace with ip netns and runs sshd in it")
	}
	n := newDecoyNet(t)
	n.control(t)
	// The lab runs go two at a time (go test's -parallel, GOMAXPROCS): a
	// decoy connection during any of them fails the one that saw it. The
	// runs that do reach the bastion (-e, play vars) go alone after them.
	cases := decoyCases(n)
	t.Run("lab runs", func(t *testing.T) {
		for _, c := range cases {
			if c.refused == "" && !c.outranks {
				t.Run(c.level, func(t *testing.T) { t.Parallel(); n.check(t, c) })
			}
		}
	})
	for _, c := range cases {
		if c.refused != "" || c.outranks {
			t.Run(c.level, func(t *testing.T) { n.check(t, c) })
		}
	}
}

// decoyNet is the namespace, its three sshds and the keys of both worlds.
type decoyNet struct {
	ns, dir, prodKey         string
	lab, bastion, prod       *nsSSHD
	labKeys                  sshkeys.KeyPair
	labFingerprint, prodVars string
}

func newDecoyNet(t *testing.T) *decoyNet {
	for _, bin := range []string{"ip", "ssh-keygen", "/usr/sbin/sshd"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not installed: %v", bin, err)
		}
	}
	n := &decoyNet{ns: fmt.Sprintf("barn-decoy-%d", os.Getpid()), dir: t.TempDir()}
	mustRun(t, "ip", "netns", "add", n.ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", n.ns).Run() })
	mustRun(t, "ip", "-n", n.ns, "link", "set", "lo", "up")
	for _, a := range []string{decoyProd, decoyBastion} {
		mustRun(t, "ip", "-n", n.ns, "addr", "add", a+"/32", "dev", "lo")
	}
	var err error
	if n.labKeys, err = sshkeys.Ensure(filepath.Join(n.dir, "barn-keys"), false); err != nil {
		t.Fatal(err)
	}
	n.labFingerprint = strings.Fields(mustRun(t, "ssh-keygen", "-lf", n.labKeys.PublicPath))[1]
	n.prodKey = filepath.Join(n.dir, "prod", "id_ed25519")
	_ = os.MkdirAll(filepath.Dir(n.prodKey), 0o700)
	mustRun(t, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", n.prodKey)
	prodPub, err := os.ReadFile(n.prodKey + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	n.lab = n.startSSHD(t, "lab", "127.0.0.1", []int{labPort}, n.labKeys.Public)
	n.bastion = n.startSSHD(t, "bastion", decoyBastion, []int{22}, string(prodPub))
	n.prod = n.startSSHD(t, "production", decoyProd, []int{22, 2200}, string(prodPub))
	// Barn's pin: the lab sshd's host key under the instance's alias
	hostPub, err := os.ReadFile(n.lab.hostKey + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(n.labKeys.KnownHosts, []byte(labAlias+" "+string(hostPub)), 0o600); err != nil {
		t.Fatal(err)
	}
	// production's connection settings, as its host_vars would hold them
	// (their own known_hosts: no run of this test writes to root's ~/.ssh)
	proxy := fmt.Sprintf("ssh -F /dev/null -i %s -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -W %%h:%%p root@%s", n.prodKey, decoyBastion)
	n.prodVars = fmt.Sprintf("ansible_port: 2200\nansible_user: root\nansible_private_key_file: %s\nansible_host_key_checking: false\n"+
		"ansible_ssh_common_args: \"-o UserKnownHostsFile=%s -o 'ProxyCommand=%s'\"\n", n.prodKey, filepath.Join(n.dir, "prod", "known_hosts"), proxy)
	return n
}

// nsSSHD is one OpenSSH server in the namespace; its log is sshd's own
// (LogLevel VERBOSE logs every TCP connection as "Connection from").
type nsSSHD struct {
	name, log, hostKey string
}

func (n *decoyNet) startSSHD(t *testing.T, name, addr string, ports []int, authorized string) *nsSSHD {
	dir := filepath.Join(n.dir, "sshd-"+name)
	s := &nsSSHD{name: name, log: filepath.Join(dir, "log"), hostKey: filepath.Join(dir, "host_ed25519")}
	_ = os.MkdirAll(dir, 0o700)
	_ = os.MkdirAll("/run/sshd", 0o755) // privilege separation directory
	mustRun(t, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", s.hostKey)
	auth := filepath.Join(dir, "authorized_keys")
	var conf strings.Builder
	for _, p := range ports {
		fmt.Fprintf(&conf, "ListenAddress %s:%d\n", addr, p)
	}
	fmt.Fprintf(&conf, "HostKey %s\nAuthorizedKeysFile %s\nPidFile none\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n"+
		"KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nLogLevel VERBOSE\nSetEnv BARN_SSHD=%s\n", s.hostKey, auth, name)
	cfg := filepath.Join(dir, "sshd_config")
	for f, text := range map[string]string{auth: strings.TrimSpace(authorized) + "\n", cfg: conf.String()} {
		if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	logf, err := os.Create(s.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command("ip", "netns", "exec", n.ns, "/usr/sbin/sshd", "-D", "-e", "-f", cfg)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	// an event, not a sleep: sshd logs each socket it listens on
	for deadline := time.Now().Add(time.Minute); s.count(t, "Server listening on") < len(ports); {
		if time.Now().After(deadline) || cmd.ProcessState != nil {
			t.Fatalf("sshd %s did not listen on %s %v:\n%s", name, addr, ports, s.text(t))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return s
}

func (s *nsSSHD) text(t *testing.T) string {
	b, err := os.ReadFile(s.log)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (s *nsSSHD) count(t *testing.T, what string) int { return strings.Count(s.text(t), what) }

func mustRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// decoyCase is one level of Ansible's precedence holding production's
// connection settings: files (relative to the case's root: inv/ holds
// pigsty.yml and the export, pb/ the playbook, cwd/ the working
// directory), environment and command-line arguments. refused is the
// file Barn's refusal must name; "" means the export must win, unless
// outranks: a level no inventory can see (-e, play vars), which the
// export's documentation leaves to the user — the test pins that Ansible
// does take the decoy bastion's route there, so the guarantee is not
// claimed where it does not hold.
type decoyCase struct {
	level    string
	files    map[string]string
	env      []string
	args     []string
	playbook bool
	refused  string
	outranks bool
}

func decoyCases(n *decoyNet) []decoyCase {
	block := func(indent int) string {
		return strings.ReplaceAll(strings.TrimSuffix(n.prodVars, "\n"), "\n", "\n"+strings.Repeat(" ", indent))
	}
	pigsty := func(all, group, host string) string {
		return "all:\n  vars:\n    " + all + "\n  children:\n    pg_meta:\n      vars:\n        " + group +
			"\n      hosts:\n        " + decoyProd + ":\n          " + host + "\n"
	}
	const seq = "pg_seq: 1"
	proxy := n.prodVars[strings.Index(n.prodVars, "-o UserKnownHostsFile"):strings.LastIndex(n.prodVars, "\"")]
	extra, err := json.Marshal(map[string]any{"ansible_port": 2200, "ansible_user": "root", "ansible_private_key_file": n.prodKey,
		"ansible_host_key_checking": false, "ansible_ssh_common_args": proxy})
	if err != nil {
		panic(err)
	}
	return []decoyCase{
		{level: "inventory host entry", files: map[string]string{"inv/pigsty.yml": pigsty(seq, seq, block(10))}},
		{level: "inventory all.vars", files: map[string]string{"inv/pigsty.yml": pigsty(block(4), seq, seq)}},
		{level: "inventory group vars", files: map[string]string{"inv/pigsty.yml": pigsty(seq, block(8), seq)}},
		{level: "group_vars/all", files: map[string]string{"inv/group_vars/all.yml": n.prodVars}},
		{level: "group_vars/pg_meta", files: map[string]string{"inv/group_vars/pg_meta.yml": n.prodVars}},
		{level: "group_vars beside the playbook", playbook: true, files: map[string]string{"pb/group_vars/all.yml": n.prodVars, "pb/group_vars/pg_meta.yml": n.prodVars}},
		{level: "group_vars in the working directory", files: map[string]string{"cwd/group_vars/all.yml": n.prodVars}},
		{level: "ansible.cfg", files: map[string]string{"ansible.cfg": "[defaults]\nremote_user = root\nremote_port = 2200\nprivate_key_file = " + n.prodKey +
			"\nhost_key_checking = False\n[ssh_connection]\nssh_common_args = " + strings.ReplaceAll(proxy, "%", "%%") + "\n"}},
		{level: "ANSIBLE_* environment", env: []string{"ANSIBLE_REMOTE_USER=root", "ANSIBLE_REMOTE_PORT=2200", "ANSIBLE_PRIVATE_KEY_FILE=" + n.prodKey,
			"ANSIBLE_HOST_KEY_CHECKING=False", "ANSIBLE_SSH_COMMON_ARGS=" + proxy}},
		{level: "command-line options", args: []string{"-u", "root", "--private-key", n.prodKey, "--ssh-common-args=" + proxy}},
		{level: "-e extra vars (outside the guarantee)", outranks: true, args: []string{"-e", string(extra)}},
		{level: "play vars (outside the guarantee)", outranks: true, playbook: true, files: map[string]string{"pb/play.yml": "- hosts: all\n  gather_facts: false\n  vars:\n    " +
			block(4) + "\n  tasks:\n    - raw: echo marker=$BARN_SSHD\n"}},
		{level: "host_vars beside the inventory", refused: "inv/host_vars/" + decoyProd + ".yml", files: map[string]string{"inv/host_vars/" + decoyProd + ".yml": n.prodVars}},
		{level: "host_vars beside the playbook", refused: "pb/host_vars/" + decoyProd + ".yml", files: map[string]string{"pb/host_vars/" + decoyProd + ".yml": n.prodVars}},
		{level: "host_vars in the working directory", refused: "cwd/host_vars/" + decoyProd + ".yml", files: map[string]string{"cwd/host_vars/" + decoyProd + ".yml": n.prodVars}},
	}
}

// layout writes a case's root: the default Pigsty inventory, Barn's export
// for the lab sshd, a playbook, and the case's files over them.
func (n *decoyNet) layout(t *testing.T, files map[string]string) string {
	root := t.TempDir()
	exp, err := RenderAnsibleInventory([]AnsibleHost{{Address: decoyProd, Host: "127.0.0.1", Port: labPort, User: "root",
		IdentityFile: n.labKeys.PrivatePath, KnownHosts: n.labKeys.KnownHosts, HostKeyAlias: labAlias}})
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]string{
		"inv/pigsty.yml": "all:\n  children:\n    pg_meta:\n      hosts:\n        " + decoyProd + ": {pg_seq: 1}\n      vars: {pg_cluster: pg-meta}\n",
		"inv/barn.yml":   string(exp),
		"pb/play.yml":    "- hosts: all\n  gather_facts: false\n  tasks:\n    - raw: echo marker=$BARN_SSHD\n",
		"ansible.cfg":    "", "cwd/.keep": "", "home/.keep": "",
	}
	for k, v := range files {
		all[k] = v
	}
	for name, text := range all {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// ansible runs real Ansible (-vvv) in the namespace: ad hoc from cwd/, or
// the playbook from pb/, on the inventory sources given.
func (n *decoyNet) ansible(t *testing.T, root string, c decoyCase, sources ...string) string {
	args := []string{"netns", "exec", n.ns}
	dir := filepath.Join(root, "cwd")
	if c.playbook {
		dir = filepath.Join(root, "pb")
		args = append(args, "ansible-playbook", "-vvv")
	} else {
		args = append(args, "ansible", "-vvv", "all", "-m", "raw", "-a", "echo marker=$BARN_SSHD")
	}
	for _, s := range sources {
		args = append(args, "-i", filepath.Join(root, "inv", s))
	}
	args = append(args, c.args...)
	if c.playbook {
		args = append(args, "play.yml")
	}
	cmd := exec.Command("ip", args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(root, "home"), "ANSIBLE_NOCOLOR=1", AnsibleUnparsedFatal,
		"ANSIBLE_CONFIG=" + filepath.Join(root, "ansible.cfg"), "ANSIBLE_LOCAL_TEMP=" + filepath.Join(root, "tmp")}, c.env...)
	out, err := cmd.CombinedOutput()
	if err != nil && !c.outranks {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return string(out)
}

// control proves the decoys real: production's inventory without the
// export reaches the production sshd through the bastion, and both log it.
func (n *decoyNet) control(t *testing.T) {
	root := n.layout(t, map[string]string{"inv/host_vars/" + decoyProd + ".yml": n.prodVars})
	out := n.ansible(t, root, decoyCase{}, "pigsty.yml")
	if !strings.Contains(out, "marker=production") {
		t.Fatalf("control: production's settings did not reach the decoy production sshd:\n%s", out)
	}
	for _, s := range []*nsSSHD{n.bastion, n.prod} {
		if s.count(t, "Connection from") == 0 {
			t.Fatalf("control: the decoy %s logged no connection:\n%s", s.name, s.text(t))
		}
	}
}

// refusals is what Barn's check reports for the case's inventory, with
// the playbook's and working directory's host_vars/ and group_vars/.
func (n *decoyNet) refusals(t *testing.T, root string) []inventory.Problem {
	in, err := inventory.Open(filepath.Join(root, "inv", "pigsty.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []inventory.Problem
	for _, at := range inventory.BesideDirs(in, []string{filepath.Join(root, "pb"), filepath.Join(root, "cwd")}) {
		over, err := inventory.ConnectionOverrides(at, []string{decoyProd}, AnsibleDecidingVars())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, over...)
	}
	return out
}

func (n *decoyNet) check(t *testing.T, c decoyCase) {
	root := n.layout(t, c.files)
	refused := n.refusals(t, root)
	if c.refused != "" {
		if len(refused) == 0 {
			t.Fatalf("Barn exports although %s outranks it", c.refused)
		}
		for _, p := range refused {
			if p.File != filepath.Join(root, c.refused) || p.Line == 0 {
				t.Errorf("refusal names %s:%d, want a line of %s", p.File, p.Line, c.refused)
			}
		}
		return
	}
	if len(refused) > 0 {
		t.Errorf("Barn refuses %+v, but the export wins at this level", refused)
	}
	bastion, prod := n.bastion.count(t, "Connection from"), n.prod.count(t, "Connection from")
	accepted := n.lab.count(t, "Accepted publickey for root")
	out := n.ansible(t, root, c, "pigsty.yml", "barn.yml")
	if c.outranks {
		if n.bastion.count(t, "Connection from") == bastion {
			t.Errorf("the documented gap closed: %s no longer reaches the decoy bastion; revise the export's guarantee:\n%s", c.level, out)
		}
		return
	}
	if !strings.Contains(out, "marker=lab") || strings.Contains(out, "marker=production") || strings.Contains(out, "marker=bastion") {
		t.Errorf("the lab run was not answered by the lab sshd alone:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "SSH: EXEC") && (!strings.Contains(line, n.labKeys.PrivatePath) || !strings.Contains(line, "HostKeyAlias="+labAlias) ||
			!strings.Contains(line, n.labKeys.KnownHosts) || strings.Contains(line, n.prodKey) || strings.Contains(line, decoyBastion)) {
			t.Errorf("ssh ran without Barn's key and pins, or with production's:\n%s", line)
		}
	}
	if n.lab.count(t, "Accepted publickey for root") <= accepted || !strings.Contains(n.lab.text(t), n.labFingerprint) {
		t.Errorf("the lab sshd accepted no login with Barn's key %s:\n%s", n.labFingerprint, n.lab.text(t))
	}
	if b, p := n.bastion.count(t, "Connection from")-bastion, n.prod.count(t, "Connection from")-prod; b != 0 || p != 0 {
		t.Errorf("the decoys logged connections: bastion %d, production %d", b, p)
	}
}
