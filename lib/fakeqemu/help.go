package fakeqemu

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Capability queries and smoke starts, as barn-node doctor makes them.
//
// `-accel help`, `-machine help`, `-cpu help`, `-device help` and
// `-netdev help` print what QEMU 7.2 prints for the entries Barn uses
// (modes no-9p, no-bridge-netdev and no-q35 leave one out). A start
// with -S but without -daemonize and -pidfile is a smoke start: it stays
// up paused, answering its one -qmp monitor if given, until a signal ends it, except that in kvm-broken mode a KVM
// start aborts at once the way QEMU does on a host whose /dev/kvm cannot
// set up a vCPU.
const (
	KVMBroken      = "kvm-broken"
	No9P           = "no-9p"
	NoBridgeNetdev = "no-bridge-netdev"
	NoQ35          = "no-q35"
)

// helpQuery answers `-<what> help`; ok is false for anything else.
func helpQuery(args []string, modes map[string]bool, w io.Writer) (ok bool) {
	if len(args) != 2 || args[1] != "help" {
		return false
	}
	var lines []string
	switch args[0] {
	case "-accel":
		lines = []string{"Accelerators supported in QEMU binary:", "tcg", "kvm"}
	case "-machine":
		lines = []string{"Supported machines are:"}
		if !modes[NoQ35] {
			lines = append(lines, "q35                  Standard PC (Q35 + ICH9, 2009) (alias of pc-q35-7.2)")
		}
		lines = append(lines, "pc                   Standard PC (i440FX + PIIX, 1996) (alias of pc-i440fx-7.2)")
	case "-cpu":
		lines = []string{"Available CPUs:",
			"x86 host                  processor with all supported host features ",
			"x86 max                   Enables all features supported by the accelerator in the current host"}
	case "-device":
		lines = []string{"Storage devices:",
			`name "scsi-cd", bus SCSI, desc "virtual SCSI CD-ROM"`,
			`name "virtio-blk-pci", bus PCI, alias "virtio-blk"`,
			`name "virtio-scsi-pci", bus PCI, alias "virtio-scsi"`,
			"", "Network devices:",
			`name "virtio-net-pci", bus PCI, alias "virtio-net"`}
		if !modes[No9P] {
			lines = append(lines, "", "Uncategorized devices:", `name "virtio-9p-pci", bus PCI, alias "virtio-9p"`)
		}
	case "-netdev":
		lines = []string{"Available netdev backend types:", "socket", "stream", "tap", "user"}
		if !modes[NoBridgeNetdev] {
			lines = append(lines, "bridge")
		}
	default:
		return false
	}
	fmt.Fprintln(w, strings.Join(lines, "\n"))
	return true
}

// smoke runs a smoke start (see above) and returns its exit status.
func smoke(cfg *config) int {
	if cfg.modes[KVMBroken] && strings.HasPrefix(cfg.accel, "kvm") {
		fmt.Fprintf(os.Stderr, "%s: error: failed to set MSR 0x10a to 0x69 (FAKEQEMU_MODE=kvm-broken)\n", BinaryName)
		return 134
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	if len(cfg.monitors) == 1 {
		l, err := net.Listen("unix", cfg.monitors[0])
		if err != nil {
			return fail(err)
		}
		defer l.Close()
		go serveSmokeQMP(l)
	}
	<-sigs
	return 0
}

// serveSmokeQMP answers a paused, just-created machine's QMP: the
// greeting, then {"return":{}} to every command but query-status, which
// reports the prelaunch state -S leaves a machine in.
func serveSmokeQMP(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			enc, dec := json.NewEncoder(c), json.NewDecoder(c)
			_ = enc.Encode(map[string]any{"QMP": map[string]any{"version": map[string]any{}, "capabilities": []string{}}})
			for {
				var req struct {
					Execute string `json:"execute"`
					ID      any    `json:"id"`
				}
				if dec.Decode(&req) != nil {
					return
				}
				ret := map[string]any{}
				if req.Execute == "query-status" {
					ret = map[string]any{"status": "prelaunch", "running": false}
				}
				_ = enc.Encode(map[string]any{"return": ret, "id": req.ID})
			}
		}()
	}
}
