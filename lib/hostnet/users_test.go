package hostnet

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
)

// TestAttachesTo reads QEMU's NIC options as QEMU does: only a bridge
// netdev naming br=<bridge> exactly, with ",," a literal comma.
func TestAttachesTo(t *testing.T) {
	for _, c := range []struct {
		argv []string
		want bool
	}{
		{[]string{"qemu", "-netdev", "bridge,id=private,br=barn0,helper=/h"}, true},
		{[]string{"qemu", "-nic", "bridge,br=barn0"}, true},
		{[]string{"qemu", "--netdev", "bridge,id=p,br=barn0"}, true},
		{[]string{"qemu", "-netdev", "bridge,id=p,br=barn01"}, false},
		{[]string{"qemu", "-netdev", "bridge,id=p,,br=barn0"}, false}, // id "p,br=barn0"
		{[]string{"qemu", "-netdev", "tap,id=p,br=barn0"}, false},
		{[]string{"qemu", "netdev", "bridge,br=barn0"}, false},
		{[]string{"qemu", "-netdev"}, false},
	} {
		if got := attachesTo(c.argv, "barn0"); got != c.want {
			t.Errorf("attachesTo(%q) = %v, want %v", c.argv, got, c.want)
		}
	}
}

// TestUninstallRefusesWhileAProcessUsesTheBridge: a process in this network
// namespace started with a NIC on Barn's bridge (a QEMU whose tap is not
// attached right now) blocks uninstall, named by PID.
func TestUninstallRefusesWhileAProcessUsesTheBridge(t *testing.T) {
	f := newFakeHost(t, true, "inactive")
	if _, err := f.install(t, Options{}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", "sleep 30; :", "qemu", "-netdev", "bridge,id=private,br=barn0")
	must(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	_, err := f.Uninstall(context.Background(), nil)
	if e := exitcode.As(err); e == nil || e.Reason != "bridge_users" || !strings.Contains(e.Message, "pid "+strconv.Itoa(cmd.Process.Pid)) {
		t.Fatalf("want bridge_users naming pid %d, got %v", cmd.Process.Pid, err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if _, err := f.Uninstall(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
}
