package cli

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"barn.dev/lib/scripttest"
	"barn.dev/lib/testexec"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"barn-net": scripttest.Command(Main),
	})
}

// TestScripts runs the non-live suites in testdata/script: every path is
// redirected under $WORK (BARN_NET_ETC, BARN_NET_STATE, BARN_NET_RUN,
// BARN_NET_HELPER), nmcli/systemctl are shell fakes on PATH, and nothing
// is installed (install/uninstall run without --yes or are refused).
// Goldens: BARN_UPDATE=1.
func TestScripts(t *testing.T) {
	scripttest.Run(t, scripttest.Configure(testscript.Params{
		Dir:  "testdata/script",
		Cmds: map[string]func(*testscript.TestScript, bool, []string){"netns": cmdNetns},
		Condition: func(cond string) (bool, error) {
			if cond == "root" {
				return os.Geteuid() == 0, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Setup: func(env *testscript.Env) error {
			w := env.WorkDir
			env.Setenv("BARN_NET_ETC", w+"/etc")
			env.Setenv("BARN_NET_STATE", w+"/state")
			env.Setenv("BARN_NET_RUN", w+"/run")
			env.Setenv("BARN_NET_HELPER", w+"/qemu-bridge-helper")
			env.Setenv("BARN_BRIDGE", "barntest9")
			env.Setenv("PATH", w+"/bin:"+os.Getenv("PATH"))
			for _, d := range []string{"etc/systemd", "state", "run", "bin"} {
				if err := os.MkdirAll(w+"/"+d, 0o755); err != nil {
					return err
				}
			}
			return testexec.WriteScript(w+"/qemu-bridge-helper", []byte("#!/bin/sh\nexit 1\n"))
		},
	}))
}

// cmdNetns is `netns`: create a uniquely named network namespace
// (barn-hosts-<hex>, loopback up) and its empty /etc/netns/$NS directory,
// set $NS, and remove both when the script ends (/etc/netns too when this
// left it empty). Root only.
func cmdNetns(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: netns")
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	ns := "barn-hosts-" + hex.EncodeToString(b)
	for _, a := range [][]string{{"netns", "add", ns}, {"-n", ns, "link", "set", "lo", "up"}} {
		if out, err := exec.Command("ip", a...).CombinedOutput(); err != nil {
			ts.Fatalf("ip %v: %v: %s", a, err, out)
		}
	}
	etc := filepath.Join("/etc/netns", ns)
	ts.Defer(func() {
		_ = exec.Command("ip", "netns", "del", ns).Run()
		_ = os.RemoveAll(etc)
		_ = os.Remove("/etc/netns") // only when empty
	})
	ts.Check(os.MkdirAll(etc, 0o755))
	ts.Setenv("NS", ns)
}
