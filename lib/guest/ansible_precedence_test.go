package guest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"barn.dev/lib/inventory"
	"barn.dev/lib/testexec"
)

// A user's value for each connection variable that would take a lab run
// somewhere else, as another login or key, or without Barn's pins. argv
// says whether it shows on the ssh command line of a failing first
// connection (the sftp/scp settings only act on a file transfer, which
// never starts here; the merged variables prove those).
var hostileConnection = []struct {
	key, yaml string
	argv      bool
}{
	{"ansible_connection", "local", true},
	{"ansible_host", "203.0.113.7", true},
	{"ansible_ssh_host", "203.0.113.7", true},
	{"ansible_port", "2200", true},
	{"ansible_ssh_port", "2200", true},
	{"ansible_user", "admin", true},
	{"ansible_ssh_user", "admin", true},
	{"ansible_ssh_executable", "/nonexistent/ssh", true},
	{"ansible_sftp_executable", "/nonexistent/sftp", false},
	{"ansible_scp_executable", "/nonexistent/scp", false},
	{"ansible_ssh_args", `"-o ProxyJump=admin@bastion"`, true},
	{"ansible_ssh_common_args", `"-o ProxyJump=admin@bastion"`, true},
	{"ansible_ssh_extra_args", `"-o ProxyJump=admin@bastion"`, true},
	{"ansible_sftp_extra_args", `"-o ProxyJump=admin@bastion"`, false},
	{"ansible_scp_extra_args", `"-o ProxyJump=admin@bastion"`, false},
	{"ansible_private_key_file", "/home/u/.ssh/prod", true},
	{"ansible_ssh_private_key_file", "/home/u/.ssh/prod", true},
	{"ansible_host_key_checking", "false", true},
	{"ansible_ssh_host_key_checking", "false", true},
	{"ansible_ssh_pkcs11_provider", "/usr/lib/evil-pkcs11.so", true},
	// a master the user keeps open to production: the plugin would name
	// its socket on the command line, were ControlPath=none not there
	{"ansible_control_path", `"%(directory)s/prod-%%h-%%p-%%r"`, false},
	{"ansible_control_path_dir", `"~/prod-cp"`, false},
}

// The levels of a Pigsty inventory at which one host's variable can be
// set without touching any other host (each host is alone in its group).
var hostLevels = []string{"host_vars", "group", "host", "group_vars"}

// TestAnsibleExportPrecedence is the export's contract, proven with real
// Ansible on generated layouts: for every connection variable (the table
// above covers AnsibleConnectionVars) at every level a user can set it
// — all.vars, a group's vars, the host's entry, group_vars/all,
// group_vars/<group>, host_vars/<host>, ANSIBLE_* environment, ansible.cfg,
// the command line — either Barn refuses the export
// (inventory.ConnectionOverrides names the definition) or `ansible -i
// pigsty.yml -i barn.yml -m ping` runs exactly the ssh command line it runs
// with no user settings at all, and ansible-inventory merges exactly the
// export's values. Barn refuses exactly where Ansible would deviate.
func TestAnsibleExportPrecedence(t *testing.T) {
	if testing.Short() {
		t.Skip("a dozen real ansible runs: not in -short runs (make test runs it)")
	}
	requireAnsible(t, "ansible", "ansible-inventory")
	var keys []string
	for _, h := range hostileConnection {
		keys = append(keys, h.key)
	}
	if !slices.Equal(keys, AnsibleConnectionVars()) {
		t.Fatalf("the hostile table covers %v, the export sets %v", keys, AnsibleConnectionVars())
	}
	t.Run("per-host levels", testHostLevels)
	// The levels that reach every host share one layout of two hosts, one
	// baseline, and are undone after each.
	l := newLab(t, 2)
	base := l.baseline(t)
	env := l.env
	for _, level := range []string{"all", "group_vars/all", "env", "ansible.cfg", "cli"} {
		t.Run(level, func(t *testing.T) {
			l.env, l.args = append([]string{}, env...), nil
			l.inventory(t, "", none, none)
			for _, f := range []string{filepath.Join(l.dir, "inv", "group_vars", "all.yml"), filepath.Join(l.dir, "none.cfg")} {
				if err := os.WriteFile(f, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			testGlobalLevel(t, l, base, level)
		})
	}
}

// requireAnsible skips t when one of bins is not installed, and fails it
// when make requires Ansible (BARN_REQUIRE_ANSIBLE=1).
func requireAnsible(t *testing.T, bins ...string) {
	t.Helper()
	for _, bin := range bins {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("BARN_REQUIRE_ANSIBLE") == "1" {
				t.Fatalf("%s is required (BARN_REQUIRE_ANSIBLE=1): %v", bin, err)
			}
			t.Skipf("%s is not installed", bin)
		}
	}
}

// lab is one generated layout: an inventory directory with pigsty.yml,
// group_vars/, host_vars/ and the export barn.yml beside it, and an ssh
// on PATH that records its command line under log/, named by the
// ConnectTimeout that identifies the host.
type lab struct {
	dir, log string
	hosts    []string
	env      []string
	args     []string
	export   map[string]map[string]any // hostvars with no user settings
}

func newLab(t *testing.T, n int) *lab {
	l := &lab{dir: t.TempDir()}
	l.log = filepath.Join(l.dir, "log")
	bin := filepath.Join(l.dir, "bin")
	for _, d := range []string{l.log, bin, filepath.Join(l.dir, "inv", "group_vars"), filepath.Join(l.dir, "inv", "host_vars"), filepath.Join(l.dir, "home")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	shim := "#!/bin/sh\nfor a in \"$@\"; do case $a in ConnectTimeout=*) id=${a#ConnectTimeout=};; esac; done\n" +
		"printf '%s\\n' \"$@\" > \"" + l.log + "/$id\"\nexit 255\n"
	if err := testexec.WriteScript(filepath.Join(bin, "ssh"), []byte(shim)); err != nil {
		t.Fatal(err)
	}
	var hosts []AnsibleHost
	for i := 0; i < n; i++ {
		addr := fmt.Sprintf("10.10.%d.%d", i/200, 10+i%200)
		l.hosts = append(l.hosts, addr)
		hosts = append(hosts, AnsibleHost{Address: addr, User: "dba", IdentityFile: filepath.Join(l.dir, "keys", "id_ed25519"),
			KnownHosts: filepath.Join(l.dir, "keys", "known_hosts"), HostKeyAlias: fmt.Sprintf("barn-%d", i)})
	}
	exp, err := RenderAnsibleInventory(hosts)
	if err != nil {
		t.Fatal(err)
	}
	l.write(t, "barn.yml", string(exp))
	if err := os.WriteFile(filepath.Join(l.dir, "none.cfg"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "ANSIBLE_") && !strings.HasPrefix(e, "PATH=") && !strings.HasPrefix(e, "HOME=") {
			l.env = append(l.env, e)
		}
	}
	l.env = append(l.env, "PATH="+bin+":"+os.Getenv("PATH"), "HOME="+filepath.Join(l.dir, "home"), "ANSIBLE_NOCOLOR=1",
		"ANSIBLE_LOCAL_TEMP="+filepath.Join(l.dir, "tmp"), "ANSIBLE_CONFIG="+filepath.Join(l.dir, "none.cfg"))
	return l
}

func (l *lab) write(t *testing.T, name, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(l.dir, "inv", name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// inventory writes pigsty.yml: host i alone in group gi, with its marker
// ansible_ssh_timeout 100+i and the host entry and group vars given.
func (l *lab) inventory(t *testing.T, allVars string, hostVars, groupVars func(i int) string) {
	var b strings.Builder
	b.WriteString("all:\n  vars: {" + allVars + "}\n  children:\n")
	for i, h := range l.hosts {
		entry := fmt.Sprintf("ansible_ssh_timeout: %d", 100+i)
		if v := hostVars(i); v != "" {
			entry += ", " + v
		}
		fmt.Fprintf(&b, "    g%d:\n      hosts:\n        %s: { %s }\n      vars: { %s }\n", i, h, entry, groupVars(i))
	}
	l.write(t, "pigsty.yml", b.String())
}

// ping runs ansible against pigsty.yml and barn.yml and returns each
// host's ssh command line ("" when ssh was never run for it).
func (l *lab) ping(t *testing.T) map[string]string {
	t.Helper()
	_ = os.RemoveAll(l.log)
	_ = os.MkdirAll(l.log, 0o755)
	args := append([]string{"-i", "pigsty.yml", "-i", "barn.yml", "all", "-m", "ping", "-o", "-f", "8"}, l.args...)
	cmd := exec.Command("ansible", args...)
	cmd.Dir, cmd.Env = filepath.Join(l.dir, "inv"), l.env
	out, err := cmd.CombinedOutput()
	// 2: a host failed, 4: a host was unreachable; anything else (5: bad
	// options) means Ansible never tried
	if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 2 && ee.ExitCode() != 4) {
		t.Fatalf("ansible: %v\n%s", err, out)
	}
	got := map[string]string{}
	for i, h := range l.hosts {
		b, _ := os.ReadFile(filepath.Join(l.log, fmt.Sprint(100+i)))
		got[h] = string(b)
	}
	return got
}

// merged is ansible-inventory's hostvars for the given -i sources.
func (l *lab) merged(t *testing.T, sources ...string) map[string]map[string]any {
	t.Helper()
	var args []string
	for _, s := range sources {
		args = append(args, "-i", s)
	}
	cmd := exec.Command("ansible-inventory", append(args, "--list")...)
	cmd.Dir, cmd.Env = filepath.Join(l.dir, "inv"), l.env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ansible-inventory: %v\n%s", err, out)
	}
	var doc struct {
		Meta struct {
			Hostvars map[string]map[string]any `json:"hostvars"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Meta.Hostvars
}

// refused is Barn's verdict: host → the keys ConnectionOverrides names.
func (l *lab) refused(t *testing.T) map[string][]string {
	t.Helper()
	in, err := inventory.Open(filepath.Join(l.dir, "inv", "pigsty.yml"))
	if err != nil {
		t.Fatal(err)
	}
	over, err := inventory.ConnectionOverrides(in, l.hosts, AnsibleDecidingVars())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, o := range over {
		if o.File == "" || o.Line == 0 {
			t.Errorf("override without file:line: %+v", o)
		}
		out[o.Host] = append(out[o.Host], o.Key)
	}
	return out
}

func none(int) string { return "" }

// baseline is every host's ssh command line with no user settings.
func (l *lab) baseline(t *testing.T) map[string]string {
	l.inventory(t, "", none, none)
	base := l.ping(t)
	l.export = l.merged(t, "pigsty.yml", "barn.yml")
	for h, argv := range base {
		if !strings.Contains(argv, "HostName="+h+"\n") || !strings.Contains(argv, "-F\n/dev/null\n") {
			t.Fatalf("%s: the baseline does not run Barn's ssh arguments:\n%s", h, argv)
		}
		// no connection sharing: ControlPath=none is the only ControlPath
		if strings.Count(strings.ToLower(argv), "controlpath") != 1 || !strings.Contains(argv, "-o\nControlPath=none\n") {
			t.Fatalf("%s: the baseline may share a connection:\n%s", h, argv)
		}
		if c := l.export[h]["ansible_connection"]; c != "ansible.builtin.ssh" {
			t.Fatalf("%s: Ansible merges ansible_connection %v, want ansible.builtin.ssh", h, c)
		}
	}
	return base
}

func testHostLevels(t *testing.T) {
	// hosts 0..len-1: variable i alone in host_vars/; then one host per
	// other level with every variable at once
	nv := len(hostileConnection)
	l := newLab(t, nv+len(hostLevels)-1)
	base := l.baseline(t)
	var all []string
	for _, h := range hostileConnection {
		all = append(all, h.key+": "+h.yaml)
	}
	levelOf := func(i int) string {
		if i < nv {
			return "host_vars"
		}
		return hostLevels[1+i-nv]
	}
	at := func(level string) func(i int) string {
		return func(i int) string {
			if levelOf(i) != level {
				return ""
			}
			return strings.Join(all, ", ")
		}
	}
	l.inventory(t, "", at("host"), at("group"))
	for i := range l.hosts {
		switch levelOf(i) {
		case "host_vars":
			h := hostileConnection[i]
			l.write(t, "host_vars/"+l.hosts[i]+".yml", "# the user's settings\n"+h.key+": "+h.yaml+"\n")
		case "group_vars":
			l.write(t, fmt.Sprintf("group_vars/g%d.yml", i), strings.Join(all, "\n")+"\n")
		}
	}
	refused, argv := l.refused(t), l.ping(t)
	merged := l.merged(t, "pigsty.yml", "barn.yml")
	for i, h := range l.hosts {
		if level := levelOf(i); level != "host_vars" {
			if len(refused[h]) > 0 {
				t.Errorf("every variable at %s: Barn refuses %v, but the export wins there", level, refused[h])
			}
			for _, k := range AnsibleConnectionVars() {
				if !sameOption(merged[h], l.export[h], k) {
					t.Errorf("every variable at %s: Ansible's value for %s is %v, the export's %v", level, k, merged[h][k], l.export[h][k])
				}
			}
			if argv[h] != base[h] {
				t.Errorf("every variable at %s: Ansible ran ssh as\n%s\nwhere the export alone runs\n%s", level, argv[h], base[h])
			}
			continue
		}
		hv := hostileConnection[i]
		want := slices.Contains(AnsibleDecidingVars(), hv.key)
		if got := slices.Equal(refused[h], []string{hv.key}); got != want || !want && len(refused[h]) > 0 {
			t.Errorf("%s in host_vars/: Barn refuses %v, want refused=%v", hv.key, refused[h], want)
		}
		if same := sameOption(merged[h], l.export[h], hv.key); same == want {
			t.Errorf("%s in host_vars/: Ansible's value for the option is %v (export %v), but Barn refused=%v", hv.key, merged[h][hv.key], l.export[h][hv.key], want)
		}
		if same := argv[h] == base[h]; hv.argv && same == want || !hv.argv && !same {
			t.Errorf("%s in host_vars/: Barn refused=%v, but Ansible ran ssh as\n%s\nwhere the export alone runs\n%s", hv.key, want, argv[h], base[h])
		}
	}
}

// testGlobalLevel sets every hostile value at once at a level that
// reaches every host: Barn refuses nothing and must win over all of them.
func testGlobalLevel(t *testing.T, l *lab, base map[string]string, level string) {
	var inline []string
	var file strings.Builder
	for _, h := range hostileConnection {
		inline = append(inline, h.key+": "+h.yaml)
		fmt.Fprintf(&file, "%s: %s\n", h.key, h.yaml)
	}
	bastion := "-o ProxyJump=admin@bastion"
	switch level {
	case "all":
		l.inventory(t, strings.Join(inline, ", "), none, none)
	case "group_vars/all":
		l.write(t, "group_vars/all.yml", file.String())
	case "env":
		l.env = append(l.env, "ANSIBLE_TRANSPORT=local", "ANSIBLE_SSH_CONTROL_PATH=~/prod-%%h", "ANSIBLE_SSH_CONTROL_PATH_DIR=~/prod-cp", "ANSIBLE_REMOTE_USER=admin", "ANSIBLE_REMOTE_PORT=2200",
			"ANSIBLE_SSH_EXECUTABLE=/nonexistent/ssh", "ANSIBLE_SSH_ARGS="+bastion, "ANSIBLE_SSH_COMMON_ARGS="+bastion,
			"ANSIBLE_SSH_EXTRA_ARGS="+bastion, "ANSIBLE_PRIVATE_KEY_FILE=/home/u/.ssh/prod", "ANSIBLE_HOST_KEY_CHECKING=False",
			"ANSIBLE_PKCS11_PROVIDER=/usr/lib/evil-pkcs11.so")
	case "ansible.cfg":
		cfg := "[defaults]\ntransport = local\nremote_user = admin\nremote_port = 2200\nprivate_key_file = /home/u/.ssh/prod\nhost_key_checking = False\n" +
			"[ssh_connection]\ncontrol_path = %%(directory)s/prod-%%%%h\ncontrol_path_dir = ~/prod-cp\nssh_executable = /nonexistent/ssh\nssh_args = " + bastion + "\nssh_common_args = " + bastion + "\nssh_extra_args = " + bastion + "\n"
		if err := os.WriteFile(filepath.Join(l.dir, "none.cfg"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	case "cli":
		l.args = []string{"-c", "paramiko", "-u", "admin", "--private-key", "/home/u/.ssh/prod", "--ssh-common-args=" + bastion, "--ssh-extra-args=" + bastion}
	}
	if r := l.refused(t); len(r) > 0 {
		t.Errorf("Barn refuses %v, but nothing outranks the export at %s", r, level)
	}
	argv := l.ping(t)
	for _, h := range l.hosts {
		if argv[h] != base[h] {
			t.Errorf("%s: with the user's settings at %s Ansible ran ssh as\n%s\nwhere the export alone runs\n%s", h, level, argv[h], base[h])
		}
	}
	if level == "all" || level == "group_vars/all" {
		merged := l.merged(t, "pigsty.yml", "barn.yml")
		for _, h := range l.hosts {
			for _, k := range AnsibleConnectionVars() {
				if !reflect.DeepEqual(merged[h][k], l.export[h][k]) {
					t.Errorf("%s %s: Ansible merges %v, the export says %v", h, k, merged[h][k], l.export[h][k])
				}
			}
		}
	}
}

// sameOption reports whether the option key sets has the same value in
// two hostvars, read as the plugin reads it: its last name defined wins.
func sameOption(a, b map[string]any, key string) bool {
	value := func(vars map[string]any) any {
		for _, o := range ansibleOptions {
			if slices.Contains(o, key) {
				var v any
				for _, name := range o {
					if x, ok := vars[name]; ok && x != nil {
						v = x
					}
				}
				return v
			}
		}
		panic(key)
	}
	return reflect.DeepEqual(value(a), value(b))
}
