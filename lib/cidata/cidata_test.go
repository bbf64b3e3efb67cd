package cidata

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/golden"
	"barn.dev/lib/spec"
)

const testKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHb6kR8G0v3bXw7pN0q3nq2p7b3mF1m0fJ6nqgYqkqg3 barn"

func fixture() (spec.Deployment, []spec.Node) {
	d := spec.Deployment{
		Name: "barn", Arch: "amd64", Image: "debian:12",
		Subnet: spec.Subnet{CIDR: "10.10.10.0/24", Host: "10.10.10.1", Reserved: "10.10.10.2-10.10.10.8", Pool: "10.10.10.9-10.10.10.254"},
		User:   spec.User{Name: "dba", UID: 88},
	}
	nodes := []spec.Node{
		{
			Name: "meta", Address: "10.10.10.10", Control: true,
			MAC:   spec.NICs{Management: "52:54:00:0a:0a:0a", Private: "52:54:01:0a:0a:0a"},
			Image: "debian:12", CPUs: 2, MemoryBytes: 1 << 30, RootDiskBytes: 8 << 30,
			Disks:   []spec.Disk{{Name: "data", Mount: "/data", SizeBytes: 1 << 30, FS: "auto", Serial: "abcdefghijklmnopqrst"}},
			Aliases: []string{"pg-meta", "infra"},
			Shares:  []spec.Share{{Host: "/srv/pkg", Guest: "/mnt/pkg", Readonly: true, Tag: "barn-0123456789abcdef0123"}},
		},
		{
			Name: "pg-test-1", Address: "10.10.10.11",
			MAC:   spec.NICs{Management: "52:54:00:0a:0a:0b", Private: "52:54:01:0a:0a:0b"},
			Image: "debian:12", CPUs: 1, MemoryBytes: 1 << 30, RootDiskBytes: 8 << 30,
			Disks: []spec.Disk{}, Aliases: []string{}, Shares: []spec.Share{},
		},
	}
	for i := range nodes {
		nodes[i].SpecHash = spec.NodeHash(d, nodes[i])
	}
	return d, nodes
}

func fixtureInput(t *testing.T, node int) Input {
	t.Helper()
	d, nodes := fixture()
	in := Input{Deployment: d, Node: nodes[node], Peers: nodes, Generation: 3, PublicKey: testKey}
	if nodes[node].Control {
		in.ControlPrivateKey = "-----BEGIN OPENSSH PRIVATE KEY-----\nFAKEKEYFORGOLDEN\n-----END OPENSSH PRIVATE KEY-----\n"
	}
	return in
}

func TestRenderGolden(t *testing.T) {
	for i, prefix := range []string{"control", "peer"} {
		f, err := Render(fixtureInput(t, i))
		if err != nil {
			t.Fatal(err)
		}
		golden.Check(t, filepath.Join("testdata", prefix+".meta-data"), f.MetaData)
		golden.Check(t, filepath.Join("testdata", prefix+".network-config"), f.NetworkConfig)
		golden.Check(t, filepath.Join("testdata", prefix+".user-data"), f.UserData)
	}
}

func TestRenderIsPure(t *testing.T) {
	a, err := Render(fixtureInput(t, 0))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Render(fixtureInput(t, 0))
	if !bytes.Equal(a.UserData, b.UserData) || !bytes.Equal(a.NetworkConfig, b.NetworkConfig) || !bytes.Equal(a.MetaData, b.MetaData) {
		t.Fatal("Render is not deterministic")
	}
}

// TestNetworkConfigContract decodes the rendered YAML and checks the
// two-NIC contract field by field.
func TestNetworkConfigContract(t *testing.T) {
	f, err := Render(fixtureInput(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(f.NetworkConfig, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["version"] != 2 {
		t.Fatalf("version = %v", doc["version"])
	}
	eth := doc["ethernets"].(map[string]any)
	if len(eth) != 2 {
		t.Fatalf("want 2 ethernets, got %v", eth)
	}
	mg := eth["management"].(map[string]any)
	pr := eth["private"].(map[string]any)
	if mg["match"].(map[string]any)["macaddress"] != "52:54:00:0a:0a:0b" || mg["dhcp4"] != true {
		t.Errorf("management = %v", mg)
	}
	if pr["match"].(map[string]any)["macaddress"] != "52:54:01:0a:0a:0b" {
		t.Errorf("private match = %v", pr["match"])
	}
	addrs := pr["addresses"].([]any)
	if len(addrs) != 1 || addrs[0] != "10.10.10.11/24" {
		t.Errorf("private addresses = %v", addrs)
	}
	for _, k := range []string{"dhcp4", "dhcp6", "accept-ra"} {
		if pr[k] != false {
			t.Errorf("private %s = %v, want false", k, pr[k])
		}
	}
	if ll, ok := pr["link-local"].([]any); !ok || len(ll) != 0 {
		t.Errorf("private link-local = %v, want []", pr["link-local"])
	}
	for _, k := range []string{"gateway4", "routes", "nameservers", "set-name"} {
		if _, ok := pr[k]; ok {
			t.Errorf("private has %s", k)
		}
		if _, ok := mg[k]; ok && k == "set-name" {
			t.Errorf("management has set-name")
		}
	}
}

// TestSeedParsesWithPyYAML parses every file with the YAML 1.1 parser
// cloud-init itself uses and checks that MACs stay strings (a bare
// 52:54:00:12:34:56 is a sexagesimal integer in YAML 1.1).
func TestSeedParsesWithPyYAML(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed: cannot run cloud-init's YAML parser")
	}
	if err := exec.Command("python3", "-c", "import yaml").Run(); err != nil {
		t.Skip("python3-yaml not installed: cannot run cloud-init's YAML parser")
	}
	f, err := Render(fixtureInput(t, 0))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, b := range map[string][]byte{"meta-data": f.MetaData, "user-data": f.UserData, "network-config": f.NetworkConfig} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	script := `
import sys, yaml
d = sys.argv[1]
m = yaml.safe_load(open(d + "/meta-data"))
assert m == {"instance-id": "barn-meta-g3", "local-hostname": "meta"}, m
n = yaml.safe_load(open(d + "/network-config"))
for k in ("management", "private"):
    mac = n["ethernets"][k]["match"]["macaddress"]
    assert isinstance(mac, str) and len(mac) == 17, (k, mac)
    assert "set-name" not in n["ethernets"][k]
u = open(d + "/user-data").read()
assert u.startswith("#cloud-config\n")
u = yaml.safe_load(u)
assert u["users"][0]["name"] == "dba" and u["users"][0]["uid"] == 88, u["users"]
assert u["users"][0]["sudo"] == "ALL=(ALL) NOPASSWD:ALL"
assert u["ssh_pwauth"] is False and u["disable_root"] is True
paths = [f["path"] for f in u["write_files"]]
assert "/usr/local/libexec/barn-finalize" in paths and "/var/lib/barn/control-id_ed25519" in paths, paths
for f in u["write_files"]:
    assert isinstance(f["permissions"], str), f
print("ok")
`
	out, err := exec.Command("python3", "-c", script, dir).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("PyYAML check failed: %v\n%s", err, out)
	}
}

func TestUserDataContract(t *testing.T) {
	ctl, err := Render(fixtureInput(t, 0))
	if err != nil {
		t.Fatal(err)
	}
	peer, err := Render(fixtureInput(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	type wf struct{ Path, Content, Permissions string }
	var u struct {
		Hostname   string `yaml:"hostname"`
		WriteFiles []wf   `yaml:"write_files"`
		Runcmd     [][]string
		Users      []map[string]any
	}
	if err := yaml.Unmarshal(peer.UserData, &u); err != nil {
		t.Fatal(err)
	}
	files := map[string]wf{}
	for _, f := range u.WriteFiles {
		files[f.Path] = f
	}
	if _, ok := files["/var/lib/barn/control-id_ed25519"]; ok {
		t.Error("a non-control node received the deployment private key")
	}
	if !bytes.Contains(ctl.UserData, []byte("/var/lib/barn/control-id_ed25519")) {
		t.Error("the control node did not receive the deployment private key")
	}
	env := files["/etc/barn/setup.env"].Content
	for _, want := range []string{"BARN_NODE='pg-test-1'", "BARN_GENERATION='3'", "BARN_PRIVATE_MAC='52:54:01:0a:0a:0b'", "BARN_STAGES='hosts private-network'", "BARN_UID='88'"} {
		if !strings.Contains(env, want) {
			t.Errorf("setup.env lacks %s:\n%s", want, env)
		}
	}
	if got := files["/etc/barn/hosts"].Content; got != "10.10.10.10\tmeta pg-meta infra\n10.10.10.11\tpg-test-1\n" {
		t.Errorf("hosts block = %q", got)
	}
	for _, s := range scriptNames {
		f, ok := files[LibexecDir+"/"+s]
		if !ok || f.Permissions != "0755" || !strings.HasPrefix(f.Content, "#!") {
			t.Errorf("helper %s missing or not executable: %+v", s, f.Permissions)
		}
	}
	if len(u.Runcmd) != 1 || u.Runcmd[0][0] != Finalize {
		t.Errorf("runcmd = %v", u.Runcmd)
	}
	if u.Users[0]["ssh_authorized_keys"].([]any)[0] != testKey {
		t.Errorf("authorized key = %v", u.Users[0]["ssh_authorized_keys"])
	}
	// Scripts must stay literal blocks (readable in the seed).
	if !bytes.Contains(peer.UserData, []byte("content: |")) {
		t.Error("helper scripts are not emitted as literal blocks")
	}
}

// The login user's uid reaches the guest for any user, not only dba
// (issue 12, case 2: admin with node_admin_uid 1500 got 1000): user-data
// creates the user with it and setup.env hands it to the identity stage,
// which checks it. Only dba gets the admin group; an unset uid (0) is
// left to the guest and not checked.
func TestLoginUserUID(t *testing.T) {
	for _, c := range []struct {
		user           spec.User
		uid            any
		group, envUID  string
		envGroup, bcmd bool
	}{
		{spec.User{Name: "dba", UID: 88}, 88, "admin", "88", true, true},
		{spec.User{Name: "admin", UID: 1500}, 1500, "", "1500", false, false},
		{spec.User{Name: "admin", UID: 88}, 88, "", "88", false, false},
		{spec.User{Name: "admin"}, nil, "", "", false, false},
	} {
		in := fixtureInput(t, 1)
		in.Deployment.User = c.user
		f, err := Render(in)
		if err != nil {
			t.Fatal(err)
		}
		var u struct {
			Bootcmd    [][]string                       `yaml:"bootcmd"`
			Users      []map[string]any                 `yaml:"users"`
			WriteFiles []struct{ Path, Content string } `yaml:"write_files"`
		}
		if err := yaml.Unmarshal(f.UserData, &u); err != nil {
			t.Fatal(err)
		}
		if got := u.Users[0]["uid"]; got != c.uid || u.Users[0]["name"] != c.user.Name {
			t.Errorf("%+v: user-data user %v uid %v, want uid %v", c.user, u.Users[0]["name"], got, c.uid)
		}
		if g, _ := u.Users[0]["primary_group"].(string); g != c.group {
			t.Errorf("%+v: primary_group %q, want %q", c.user, g, c.group)
		}
		if (len(u.Bootcmd) > 0) != c.bcmd {
			t.Errorf("%+v: bootcmd %v", c.user, u.Bootcmd)
		}
		env := ""
		for _, w := range u.WriteFiles {
			if w.Path == ConfigDir+"/setup.env" {
				env = w.Content
			}
		}
		if !strings.Contains(env, "\nBARN_UID='"+c.envUID+"'\n") || strings.Contains(env, "BARN_GID='88'") != c.envGroup {
			t.Errorf("%+v: setup.env\n%s", c.user, env)
		}
	}
}

func TestRenderRefusesBadInput(t *testing.T) {
	cases := map[string]func(*Input){
		"dba uid":          func(in *Input) { in.Deployment.User.UID = 1000 },
		"rsa key":          func(in *Input) { in.PublicKey = "ssh-rsa AAAA barn" },
		"private key peer": func(in *Input) { in.ControlPrivateKey = "x" },
		"address outside":  func(in *Input) { in.Node.Address = "10.10.11.5" },
		"bad mac":          func(in *Input) { in.Node.MAC.Private = "52-54-00-00-00-01" },
		"generation 0":     func(in *Input) { in.Generation = 0 },
		"unknown stage":    func(in *Input) { in.Stages = []string{"identity"} },
		"bad serial":       func(in *Input) { in.Node.Disks = []spec.Disk{{Name: "d", Mount: "/d", Serial: "x", FS: "auto"}} },
		// /etc/hosts has no quoting: names are host names (quote.HostName)
		"alias underscore": func(in *Input) { in.Node.Aliases = []string{"pg_meta"} },
		"alias space":      func(in *Input) { in.Node.Aliases = []string{"pg meta"} },
		"alias comment":    func(in *Input) { in.Node.Aliases = []string{"#x"} },
	}
	for name, mut := range cases {
		in := fixtureInput(t, 1)
		mut(&in)
		_, err := Render(in)
		if exitcode.ClassOf(err) != exitcode.Usage {
			t.Errorf("%s: err = %v, want usage error", name, err)
		}
	}
}

func TestDefaultStages(t *testing.T) {
	_, nodes := fixture()
	if got := strings.Join(DefaultStages(nodes[0]), " "); got != "hosts data-disks shares control-ssh private-network" {
		t.Errorf("control stages = %q", got)
	}
	if got := strings.Join(DefaultStages(nodes[1]), " "); got != "hosts private-network" {
		t.Errorf("peer stages = %q", got)
	}
}

func TestInstanceIDChangesWithGeneration(t *testing.T) {
	in := fixtureInput(t, 1)
	a, _ := Render(in)
	in.Generation++
	b, _ := Render(in)
	if bytes.Equal(a.MetaData, b.MetaData) || !bytes.Contains(b.MetaData, []byte(`"barn-pg-test-1-g4"`)) {
		t.Fatalf("instance-id did not move with the generation:\n%s", b.MetaData)
	}
}

func TestScriptsAreValidShell(t *testing.T) {
	for _, s := range scriptNames {
		body, _ := Script(s)
		var cmd *exec.Cmd
		if strings.HasPrefix(string(body), "#!/usr/bin/python3") {
			if _, err := exec.LookPath("python3"); err != nil {
				continue
			}
			cmd = exec.Command("python3", "-c", "import ast,sys; ast.parse(sys.stdin.read())")
		} else {
			cmd = exec.Command("bash", "-n")
		}
		cmd.Stdin = bytes.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", s, err, out)
		}
	}
}

// TestFQDNNodeSeed: a node whose nodename is an FQDN (Pigsty's demo
// pigsty.cc) gets cloud-init's fqdn and prefer_fqdn_over_hostname, so its
// hostname is the FQDN (what Pigsty sets), and every node's hosts block
// resolves both the FQDN and the short name.
func TestFQDNNodeSeed(t *testing.T) {
	in := fixtureInput(t, 1)
	in.Node.Name, in.Node.FQDN = "pigsty", "pigsty.cc"
	in.Peers[1] = in.Node
	f, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(f.MetaData); got != "instance-id: \"barn-pigsty-g3\"\nlocal-hostname: \"pigsty.cc\"\n" {
		t.Errorf("meta-data:\n%s", got)
	}
	var u struct {
		Hostname   string `yaml:"hostname"`
		FQDN       string `yaml:"fqdn"`
		PreferFQDN bool   `yaml:"prefer_fqdn_over_hostname"`
		WriteFiles []struct {
			Path, Content string
		} `yaml:"write_files"`
	}
	if err := yaml.Unmarshal(f.UserData, &u); err != nil {
		t.Fatal(err)
	}
	if u.Hostname != "pigsty.cc" || u.FQDN != "pigsty.cc" || !u.PreferFQDN {
		t.Errorf("user-data hostname %q fqdn %q prefer %v", u.Hostname, u.FQDN, u.PreferFQDN)
	}
	files := map[string]string{}
	for _, w := range u.WriteFiles {
		files[w.Path] = w.Content
	}
	if got := files["/etc/barn/hosts"]; got != "10.10.10.10\tmeta pg-meta infra\n10.10.10.11\tpigsty.cc pigsty\n" {
		t.Errorf("hosts block:\n%s", got)
	}
	if env := files["/etc/barn/setup.env"]; !strings.Contains(env, "BARN_NODE='pigsty'\nBARN_HOSTNAME='pigsty.cc'\n") {
		t.Errorf("setup.env:\n%s", env)
	}
	// A peer's seed names the FQDN too.
	peer := fixtureInput(t, 0)
	peer.Peers[1] = in.Node
	pf, err := Render(peer)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(hostsFile(t, pf.UserData), "10.10.10.11\tpigsty.cc pigsty\n") {
		t.Errorf("peer hosts block lacks the FQDN:\n%s", pf.UserData)
	}
	// Without an FQDN nothing changes: no fqdn keys at all.
	plain, err := Render(fixtureInput(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(plain.UserData), "fqdn") {
		t.Error("a node without an FQDN has fqdn keys")
	}
	for _, bad := range []string{"other.cc", "pigsty", "pigsty.", "pigsty.CC"} {
		in.Node.FQDN = bad
		if _, err := Render(in); err == nil || !strings.Contains(err.Error(), "].fqdn") {
			t.Errorf("fqdn %q: %v", bad, err)
		}
	}
}

// TestControlSSHConfigIsReadBySSH: OpenSSH reads the control node's block
// so that every peer, by name, alias and address, goes to its private
// address as the login user with the deployment key only.
func TestControlSSHConfigIsReadBySSH(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("ssh is not installed")
	}
	in := fixtureInput(t, 0)
	cfg, err := ControlSSHConfig(in.Deployment, in.Peers, in.Node)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range in.Peers {
		for _, host := range append(append([]string{p.Name}, p.Aliases...), p.Address) {
			out, err := exec.Command("ssh", "-G", "-F", path, host).CombinedOutput()
			if err != nil {
				t.Fatalf("ssh -G %s: %v %s", host, err, out)
			}
			for _, want := range []string{"hostname " + p.Address + "\n", "user " + in.Deployment.User.Name + "\n", "identitiesonly yes\n", "identityfile ~/.ssh/id_ed25519\n"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("ssh -G %s lacks %q", host, want)
				}
			}
		}
	}
}

// hostsFile is the content of /etc/barn/hosts in user-data.
func hostsFile(t *testing.T, userData []byte) string {
	t.Helper()
	var u struct {
		WriteFiles []struct{ Path, Content string } `yaml:"write_files"`
	}
	if err := yaml.Unmarshal(userData, &u); err != nil {
		t.Fatal(err)
	}
	for _, w := range u.WriteFiles {
		if w.Path == "/etc/barn/hosts" {
			return w.Content
		}
	}
	t.Fatal("user-data writes no /etc/barn/hosts")
	return ""
}
