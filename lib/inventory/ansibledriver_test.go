package inventory

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// ansibleDriver is testdata/ansible-driver.py running ansible-core's own
// InventoryCLI (ansible-inventory --list) in process, one request per
// inventory path. TestAnsibleDriverIsTheBinary proves it answers exactly
// as the ansible-inventory binary does.
type ansibleDriver struct {
	mu         sync.Mutex
	cmd        *exec.Cmd
	in         io.WriteCloser
	out        *bufio.Scanner
	Version    string
	Precedence []string
}

// ansibleAnswer is what ansible-inventory --list says about one inventory.
type ansibleAnswer struct {
	OK       bool
	Error    string
	List     string                    // the --list document as printed
	Hostvars map[string]map[string]any // its _meta.hostvars (hosts with variables only)
	Hosts    []string                  // every host of every group, sorted
}

var (
	driverOnce sync.Once
	driver     *ansibleDriver
	driverErr  error
)

// needAnsible returns the shared driver. Without ansible-core it skips the
// test, unless BARN_REQUIRE_ANSIBLE=1 (make test and make ci set it),
// where a missing Ansible is a failure: the suites prove Barn against it.
func needAnsible(t testing.TB) *ansibleDriver {
	t.Helper()
	driverOnce.Do(func() { driver, driverErr = startAnsibleDriver() })
	if driverErr != nil {
		if os.Getenv("BARN_REQUIRE_ANSIBLE") == "1" {
			t.Fatalf("ansible-core is required here (BARN_REQUIRE_ANSIBLE=1; scripts/install-deps.sh installs it): %v", driverErr)
		}
		t.Skipf("ansible-core is not usable (apt-get install ansible; make test requires it): %v", driverErr)
	}
	return driver
}

// ansibleBinary is the ansible-inventory program.
func ansibleBinary() (string, error) { return exec.LookPath("ansible-inventory") }

// ansiblePython is the interpreter ansible-inventory runs under (its #!
// line), which is where ansible-core is importable.
func ansiblePython(bin string) (string, error) {
	f, err := os.Open(bin)
	if err != nil {
		return "", err
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "#!") {
		return "", fmt.Errorf("%s has no #! line", bin)
	}
	fields := strings.Fields(strings.TrimPrefix(line, "#!"))
	if len(fields) == 0 {
		return "", fmt.Errorf("%s has an empty #! line", bin)
	}
	if filepath.Base(fields[0]) == "env" && len(fields) > 1 {
		return exec.LookPath(fields[1])
	}
	return fields[0], nil
}

func startAnsibleDriver() (*ansibleDriver, error) {
	bin, err := ansibleBinary()
	if err != nil {
		return nil, err
	}
	py, err := ansiblePython(bin)
	if err != nil {
		return nil, err
	}
	script, err := filepath.Abs("testdata/ansible-driver.py")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(py, script)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &ansibleDriver{cmd: cmd, in: in, out: bufio.NewScanner(outPipe)}
	d.out.Buffer(make([]byte, 1<<20), 256<<20)
	if !d.out.Scan() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("%s %s did not start: %v", py, script, d.out.Err())
	}
	var hello struct {
		Ready      bool     `json:"ready"`
		Ansible    string   `json:"ansible"`
		Precedence []string `json:"precedence"`
	}
	if err := json.Unmarshal(d.out.Bytes(), &hello); err != nil || !hello.Ready {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("ansible driver: %q: %v", d.out.Text(), err)
	}
	d.Version, d.Precedence = hello.Ansible, hello.Precedence
	return d, nil
}

// list asks Ansible for `ansible-inventory -i path --list`, run in path's
// directory.
func (d *ansibleDriver) list(path string) (ansibleAnswer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := fmt.Fprintln(d.in, path); err != nil {
		return ansibleAnswer{}, err
	}
	if !d.out.Scan() {
		if err := d.out.Err(); err != nil {
			return ansibleAnswer{}, err
		}
		return ansibleAnswer{}, errors.New("ansible driver exited")
	}
	var raw struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
		List  string `json:"list"`
	}
	if err := json.Unmarshal(d.out.Bytes(), &raw); err != nil {
		return ansibleAnswer{}, err
	}
	a := ansibleAnswer{OK: raw.OK, Error: raw.Error, List: raw.List}
	if a.OK {
		var err error
		if a.Hostvars, err = hostvarsOf([]byte(raw.List)); err != nil {
			return a, err
		}
		if a.Hosts, err = hostsOf([]byte(raw.List)); err != nil {
			return a, err
		}
	}
	return a, nil
}

// hostvarsOf returns the _meta.hostvars of an ansible-inventory --list
// document.
func hostvarsOf(list []byte) (map[string]map[string]any, error) {
	var doc struct {
		Meta struct {
			Hostvars map[string]map[string]any `json:"hostvars"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(list, &doc); err != nil {
		return nil, fmt.Errorf("ansible-inventory output: %w", err)
	}
	if doc.Meta.Hostvars == nil {
		doc.Meta.Hostvars = map[string]map[string]any{}
	}
	return doc.Meta.Hostvars, nil
}

// hostsOf returns every host an ansible-inventory --list document lists
// in a group, sorted.
func hostsOf(list []byte) ([]string, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(list, &doc); err != nil {
		return nil, fmt.Errorf("ansible-inventory output: %w", err)
	}
	seen := map[string]bool{}
	for name, raw := range doc {
		var g struct {
			Hosts []string `json:"hosts"`
		}
		if name == "_meta" || json.Unmarshal(raw, &g) != nil {
			continue
		}
		for _, h := range g.Hosts {
			seen[h] = true
		}
	}
	out := []string{}
	for h := range seen {
		out = append(out, h)
	}
	sort.Strings(out)
	return out, nil
}

// ansibleEnv is the driver's environment for the binary: the same
// failure-instead-of-warning settings and no ansible.cfg.
func ansibleEnv(t testing.TB) []string {
	cfg := filepath.Join(t.TempDir(), "ansible.cfg")
	if err := os.WriteFile(cfg, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return append(os.Environ(), "ANSIBLE_CONFIG="+cfg, "ANSIBLE_INVENTORY_UNPARSED_FAILED=True", "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED=True",
		"ANSIBLE_LOCALHOST_WARNING=False", "ANSIBLE_DEPRECATION_WARNINGS=False", "ANSIBLE_NOCOLOR=True")
}

// consumedOf keeps the consumed keys of Ansible's hostvars.
func consumedOf(hv map[string]map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for h, vars := range hv {
		out[h] = map[string]any{}
		for _, k := range ConsumedKeys() {
			if v, ok := vars[k]; ok {
				out[h][k] = unwrapUnsafe(v)
			}
		}
	}
	return out
}

// unwrapUnsafe undoes --list's {"__ansible_unsafe": X} rendering of a
// !unsafe value: to a playbook the value is X, a string never templated.
func unwrapUnsafe(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if u, ok := x["__ansible_unsafe"]; ok && len(x) == 1 {
			return u
		}
		out := map[string]any{}
		for k, e := range x {
			out[k] = unwrapUnsafe(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = unwrapUnsafe(e)
		}
		return out
	}
	return v
}
