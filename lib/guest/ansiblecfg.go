package guest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"barn.dev/lib/exitcode"
)

// ansibleVarsSettings are the ansible-core settings (config/base.yml) that
// change which vars files Ansible reads or which vars plugins give a host
// its variables, with their environment variable, their ansible.cfg key
// in [defaults] and the default Barn reads by: the host_group_vars plugin
// alone, reading NAME and NAME.yml, .yaml, .json (inventory.Open). Another
// value makes Ansible read variables Barn's check of the export
// (inventory.ConnectionOverrides) does not see.
var ansibleVarsSettings = []struct{ env, key, def string }{
	{"ANSIBLE_YAML_FILENAME_EXT", "yaml_valid_extensions", ".yml, .yaml, .json"},
	{"ANSIBLE_VARS_ENABLED", "vars_plugins_enabled", "host_group_vars"},
}

// CheckAnsibleVarsSettings refuses (conflict, ansible_settings_unsupported)
// a setting of ansibleVarsSettings that differs from its default, in the
// environment (getenv) or in the ansible.cfg Ansible would read from dir
// with home (AnsibleConfigFile), naming the variable or FILE:LINE. Lists
// compare item by item, spaces and quotes aside; order counts (the first
// extension found wins). An unreadable config file is a runtime error.
func CheckAnsibleVarsSettings(getenv func(string) string, home, dir string) error {
	cfg := AnsibleConfigFile(getenv, home, dir)
	var found map[string]iniValue
	if cfg != "" {
		b, err := os.ReadFile(cfg)
		if err != nil {
			return exitcode.Wrap(exitcode.Runtime, err, "read %s", cfg)
		}
		found = iniDefaults(b)
	}
	for _, s := range ansibleVarsSettings {
		where, value := "", ""
		if v, ok := found[s.key]; ok {
			where, value = fmt.Sprintf("%s:%d: [defaults] %s", cfg, v.line, s.key), v.value
		}
		if v := getenv(s.env); v != "" {
			where, value = s.env, v // the environment beats ansible.cfg
		}
		if where == "" || slices.Equal(listOf(value), listOf(s.def)) {
			continue
		}
		return exitcode.New(exitcode.Conflict, "%s = %s changes which variables Ansible gives a host (Barn reads host_vars/ as %s = %s does), so Barn cannot tell whether a connection variable outranks the export", where, value, s.key, s.def).
			WithReason("ansible_settings_unsupported").WithNext(fmt.Sprintf("unset %s and drop %s from your ansible.cfg for lab runs", s.env, s.key))
	}
	return nil
}

// AnsibleConfigFile is the ansible.cfg Ansible reads (config/manager.py
// find_ini_config_file): ANSIBLE_CONFIG (a directory: its ansible.cfg),
// else ansible.cfg in dir unless dir is world-writable, else
// ~/.ansible.cfg, else /etc/ansible/ansible.cfg; the first that exists,
// "" for none.
func AnsibleConfigFile(getenv func(string) string, home, dir string) string {
	var tries []string
	if p := getenv("ANSIBLE_CONFIG"); p != "" {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			p = filepath.Join(p, "ansible.cfg")
		}
		tries = append(tries, p)
	}
	if fi, err := os.Stat(dir); err == nil && fi.Mode().Perm()&0o002 == 0 {
		tries = append(tries, filepath.Join(dir, "ansible.cfg"))
	}
	if home != "" {
		tries = append(tries, filepath.Join(home, ".ansible.cfg"))
	}
	for _, p := range append(tries, "/etc/ansible/ansible.cfg") {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	return ""
}

type iniValue struct {
	value string
	line  int
}

// iniDefaults reads the keys of [defaults] as Python's configparser does:
// "key = value" or "key: value", keys lower-cased, '#' and ';' lines
// comments, an indented non-empty line continuing the value above it
// (joined with a newline), the last definition winning. The line is the
// key's.
func iniDefaults(b []byte) map[string]iniValue {
	out := map[string]iniValue{}
	section, key := "", ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		raw := sc.Text()
		t := strings.TrimSpace(raw)
		switch {
		case t == "" || t[0] == '#' || t[0] == ';':
		case key != "" && (raw[0] == ' ' || raw[0] == '\t'):
			if section == "defaults" {
				v := out[key]
				v.value += "\n" + t
				out[key] = v
			}
		case t[0] == '[' && strings.HasSuffix(t, "]"):
			section, key = strings.TrimSpace(t[1:len(t)-1]), ""
		default:
			key = ""
			if i := strings.IndexAny(t, "=:"); i > 0 {
				key = strings.ToLower(strings.TrimSpace(t[:i]))
				if section == "defaults" {
					out[key] = iniValue{strings.TrimSpace(t[i+1:]), n}
				}
			}
		}
	}
	return out
}

// listOf is a setting's comma-separated list, items trimmed of spaces and
// quotes, empty items dropped, a plugin's ansible.builtin. prefix too.
func listOf(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimPrefix(strings.Trim(strings.TrimSpace(s), `"'[] `), "ansible.builtin."); s != "" {
			out = append(out, s)
		}
	}
	return out
}
