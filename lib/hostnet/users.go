package hostnet

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"barn.dev/lib/quote"
)

// What "recorded nodes are live" means to barn-net. The design says
// uninstall refuses while recorded nodes are live, but the node records
// belong to each user's state root (BARN_HOME), which barn-net, running as
// root for the whole machine, neither knows nor trusts. A live node shows
// on the host instead, and barn-net refuses while either is true:
//
//   - a link is attached to the bridge (the tap of a running QEMU's
//     private NIC; Observed.Attached);
//   - a process in this network namespace was started with a QEMU netdev
//     on the bridge (-netdev/-nic/-net bridge,…,br=<bridge>,…), whether or
//     not its tap is still attached (bridgeUsers).
//
// Stopped nodes do not block: they hold no tap, and the next start
// fails its preflight (network_unusable) until barn-net install has run
// again. `make uninstall` destroys the invoking user's nodes before it
// uninstalls the network.

// bridgeUsers lists the processes in this network namespace whose argv
// attaches a NIC to bridge, as "pid N (argv0 …)", sorted by PID. A process
// whose network namespace cannot be read is listed too (it may be in this
// one). It fails only when the process table cannot be listed.
func (h *Host) bridgeUsers(bridge string) ([]string, error) {
	proc := h.procDir()
	entries, err := os.ReadDir(proc)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", proc, err)
	}
	self, selfErr := os.Stat(filepath.Join(proc, "self", "ns", "net"))
	type user struct {
		pid  int
		desc string
	}
	var found []user
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(proc, e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue // gone, or a kernel thread
		}
		argv := strings.Split(string(bytes.TrimRight(raw, "\x00")), "\x00")
		if !attachesTo(argv, bridge) {
			continue
		}
		desc := fmt.Sprintf("pid %d (%s)", pid, filepath.Base(argv[0]))
		if selfErr == nil {
			ns, err := os.Stat(filepath.Join(proc, e.Name(), "ns", "net"))
			switch {
			case err != nil:
				desc += ", network namespace unreadable"
			case !os.SameFile(ns, self):
				continue // its bridge of that name is another namespace's
			}
		}
		found = append(found, user{pid, desc})
	}
	sort.Slice(found, func(i, j int) bool { return found[i].pid < found[j].pid })
	out := []string{}
	for _, u := range found {
		out = append(out, u.desc)
	}
	return out, nil
}

// attachesTo reports whether argv has a QEMU -netdev, -nic or -net option
// of type bridge naming br=bridge (QEMU's option syntax: "," separates,
// ",," is a literal comma).
func attachesTo(argv []string, bridge string) bool {
	for i := 0; i+1 < len(argv); i++ {
		switch strings.TrimLeft(argv[i], "-") {
		case "netdev", "nic", "net":
		default:
			continue
		}
		if !strings.HasPrefix(argv[i], "-") {
			continue
		}
		opts := quote.SplitQEMUOpts(argv[i+1])
		if len(opts) == 0 || opts[0] != "bridge" {
			continue
		}
		for _, o := range opts[1:] {
			if o == "br="+bridge {
				return true
			}
		}
	}
	return false
}
