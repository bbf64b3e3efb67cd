package hostnet

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/quote"
)

// FaultQdiscHandle is the handle of the root qdisc Barn puts on a node's
// tap for a degrade. A root qdisc with another handle is the kernel's
// default (handle 0:) or someone else's; Barn replaces only the default
// and its own, and deletes only its own.
const FaultQdiscHandle = "ba4e:"

// PrivateMAC is the private NIC's MAC Barn derives from a node's address
// (lib/inventory.MACs: 0a:ba:02:<b2>:<b3>:<b4>).
func PrivateMAC(addr netip.Addr) string {
	b := addr.As4()
	return fmt.Sprintf("0a:ba:02:%02x:%02x:%02x", b[1], b[2], b[3])
}

// NodeTap finds the tap of the node with private address addr: the one
// QEMU process in this network namespace whose argv attaches a NIC with the
// node's MAC to bridge, and the tun device that process holds open
// (/proc/PID/fdinfo: "iff: NAME"). "" when no such QEMU runs; an error when
// two do (a PID is not a VM: Barn will not guess between them).
func (h *Host) NodeTap(bridge string, addr netip.Addr) (string, error) {
	proc := h.procDir()
	entries, err := os.ReadDir(proc)
	if err != nil {
		return "", fmt.Errorf("listing %s: %w", proc, err)
	}
	self, _ := os.Stat(filepath.Join(proc, "self", "ns", "net"))
	mac := PrivateMAC(addr)
	var taps []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(proc, e.Name(), "cmdline"))
		if err != nil || !attachesTo(argvOf(raw), bridge) || !hasDeviceMAC(argvOf(raw), mac) {
			continue
		}
		if ns, err := os.Stat(filepath.Join(proc, e.Name(), "ns", "net")); self != nil && (err != nil || !os.SameFile(ns, self)) {
			continue
		}
		taps = append(taps, tunOf(filepath.Join(proc, e.Name()))...)
	}
	switch len(taps) {
	case 0:
		return "", nil
	case 1:
		return taps[0], nil
	}
	return "", exitcode.New(exitcode.Conflict, "more than one tap belongs to %s's MAC %s: %s", addr, mac, strings.Join(taps, ", ")).WithReason("fault_target_ambiguous")
}

func argvOf(raw []byte) []string {
	return strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
}

// hasDeviceMAC reports whether argv has a -device with mac=mac.
func hasDeviceMAC(argv []string, mac string) bool {
	for i := 0; i+1 < len(argv); i++ {
		if argv[i] == "-device" && slices.ContainsFunc(quote.SplitQEMUOpts(argv[i+1]), func(o string) bool { return strings.EqualFold(o, "mac="+mac) }) {
			return true
		}
	}
	return false
}

// tunOf lists the tun/tap interfaces a process holds open (the "iff:"
// line of /proc/PID/fdinfo/N for /dev/net/tun descriptors).
func tunOf(procPID string) []string {
	fds, _ := os.ReadDir(filepath.Join(procPID, "fd"))
	out := []string{}
	for _, fd := range fds {
		if t, _ := os.Readlink(filepath.Join(procPID, "fd", fd.Name())); t != "/dev/net/tun" {
			continue
		}
		f, err := os.Open(filepath.Join(procPID, "fdinfo", fd.Name()))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// a multiqueue NIC holds one descriptor per queue of one tap
			if name, ok := strings.CutPrefix(sc.Text(), "iff:"); ok && !slices.Contains(out, strings.TrimSpace(name)) {
				out = append(out, strings.TrimSpace(name))
			}
		}
		f.Close()
	}
	return out
}

// rootQdisc returns the handle and kind of dev's root qdisc.
func (h *Host) rootQdisc(ctx context.Context, dev string) (handle, kind string, err error) {
	out, err := h.Runner.Run(ctx, []string{"tc", "qdisc", "show", "dev", dev, "root"})
	if err != nil {
		return "", "", faultToolError(err, out, "tc qdisc show dev "+dev)
	}
	// "qdisc netem ba4e: root refcnt 2 limit 1000 delay 200ms"
	f := strings.Fields(string(out))
	if len(f) < 3 || f[0] != "qdisc" {
		return "", "", exitcode.New(exitcode.Runtime, "tc qdisc show dev %s printed %q", dev, out).WithReason("fault_apply_failed")
	}
	return f[2], f[1], nil
}

// setNetem puts Barn's netem root qdisc on dev (replacing the default one
// or Barn's own), refusing a root qdisc of someone else's.
func (h *Host) setNetem(ctx context.Context, dev string, n *Netem) error {
	handle, kind, err := h.rootQdisc(ctx, dev)
	if err != nil {
		return err
	}
	if handle != "0:" && handle != FaultQdiscHandle {
		return exitcode.New(exitcode.Conflict, "tap %s has a root qdisc of someone else's (%s %s); Barn does not replace it", dev, kind, handle).
			WithReason("fault_qdisc_foreign").WithNext("tc qdisc show dev " + dev)
	}
	argv := append([]string{"tc", "qdisc", "replace", "dev", dev, "root", "handle", FaultQdiscHandle, "netem"}, n.Args()...)
	if out, err := h.Runner.Run(ctx, argv); err != nil {
		if strings.Contains(string(out), "qdisc kind is unknown") {
			// tc loads sch_netem on demand; where it still says "unknown"
			// the module is missing, or on-demand loading is not allowed
			// here (a container), and only the host's root can load it.
			return exitcode.New(exitcode.Capability, "this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM): a degrade cannot be enforced on this host (isolate and partition do not need it)").
				WithReason("faults_unsupported").WithNext(netemHint("/proc/modules"))
		}
		return faultToolError(err, out, strings.Join(argv, " "))
	}
	return nil
}

// netemHint is the next step after the kernel refused a netem qdisc:
// loading sch_netem where the kernel loads modules at all (procModules,
// /proc/modules, exists), else a kernel built with it, since modprobe
// cannot help one built without module support (CONFIG_MODULES unset).
func netemHint(procModules string) string {
	if _, err := os.Stat(procModules); err != nil {
		return "boot a kernel built with CONFIG_NET_SCH_NETEM (this one has no loadable modules: " + procModules + " is absent); barn-net fault isolate and partition work without it"
	}
	return "modprobe sch_netem"
}

// clearNetem deletes Barn's root qdisc from dev; any other is left alone.
func (h *Host) clearNetem(ctx context.Context, dev string) error {
	handle, kind, err := h.rootQdisc(ctx, dev)
	if err != nil || handle != FaultQdiscHandle || kind != "netem" {
		return err
	}
	if out, err := h.Runner.Run(ctx, []string{"tc", "qdisc", "del", "dev", dev, "root", "handle", FaultQdiscHandle}); err != nil {
		return faultToolError(err, out, "tc qdisc del dev "+dev+" root")
	}
	return nil
}
