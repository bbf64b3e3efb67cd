package guest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
)

// TestAnsibleVarsSettings: a changed yaml_valid_extensions makes the real
// ansible read a host_vars/ file Barn's check does not (its ssh command
// line then carries the user's bastion), so Barn refuses the setting —
// from the environment or from the ansible.cfg Ansible reads, with
// FILE:LINE — and accepts the defaults written out. A changed
// vars_plugins_enabled is refused the same way.
func TestAnsibleVarsSettings(t *testing.T) {
	if testing.Short() {
		t.Skip("real ansible runs: not in -short runs")
	}
	requireAnsible(t, "ansible", "ansible-inventory")
	l := newLab(t, 1)
	base := l.baseline(t)[l.hosts[0]]
	l.write(t, "host_vars/"+l.hosts[0]+".conf", "ansible_ssh_common_args: \"-o ProxyJump=admin@bastion\"\n")
	if r := l.refused(t); len(r) > 0 {
		t.Fatalf("Barn reads .conf host_vars: %v", r)
	}
	cfg := filepath.Join(l.dir, "none.cfg")
	env := l.env
	check := func(extra map[string]string) error {
		return CheckAnsibleVarsSettings(func(k string) string {
			if v, ok := extra[k]; ok {
				return v
			}
			for _, e := range l.env {
				if strings.HasPrefix(e, k+"=") {
					return e[len(k)+1:]
				}
			}
			return ""
		}, filepath.Join(l.dir, "home"), filepath.Join(l.dir, "inv"))
	}
	for _, c := range []struct {
		name, env, cfg string
		reads          bool   // Ansible reads the .conf file
		refusal        string // "" for none
	}{
		{"defaults", "", "[defaults]\nyaml_valid_extensions = .yml, .yaml, .json\nvars_plugins_enabled = host_group_vars\n", false, ""},
		{"env", ".yml,.conf", "", true, "ANSIBLE_YAML_FILENAME_EXT = .yml,.conf"},
		{"ansible.cfg", "", "# mine\n[defaults]\nyaml_valid_extensions = .yml, .conf\n", true, cfg + ":3: [defaults] yaml_valid_extensions = .yml, .conf"},
		// configparser joins an indented line to the value above it.
		{"continued", "", "[defaults]\nyaml_valid_extensions = .yml, .yaml, .json\n  , .conf\n", true, cfg + ":2: [defaults] yaml_valid_extensions"},
		{"vars plugins", "", "[defaults]\nvars_plugins_enabled = ansible.builtin.host_group_vars, community.general.mine\n", false, cfg + ":2: [defaults] vars_plugins_enabled"},
	} {
		if err := os.WriteFile(cfg, []byte(c.cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		l.env = append([]string{}, env...)
		extra := map[string]string{}
		if c.env != "" {
			l.env = append(l.env, "ANSIBLE_YAML_FILENAME_EXT="+c.env)
			extra["ANSIBLE_YAML_FILENAME_EXT"] = c.env
		}
		if c.name != "vars plugins" { // Ansible would fail to load the made-up plugin
			if got := l.ping(t)[l.hosts[0]]; (got != base) != c.reads || c.reads && !strings.Contains(got, "ProxyJump=admin@bastion") {
				t.Errorf("%s: Ansible read the .conf file: %v, want %v:\n%s", c.name, got != base, c.reads, got)
			}
		}
		err := check(extra)
		if c.refusal == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if e := exitcode.As(err); e == nil || e.Reason != "ansible_settings_unsupported" || !strings.Contains(e.Message, c.refusal) {
			t.Errorf("%s: %v, want a refusal naming %q", c.name, err, c.refusal)
		}
	}
}
