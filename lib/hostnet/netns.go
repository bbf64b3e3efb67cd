package hostnet

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"barn.dev/lib/exitcode"
)

// Hosts files and network namespaces. `ip netns exec NS` gives a command
// the namespace's own /etc/hosts only when /etc/netns/NS/hosts exists (it
// bind-mounts it over /etc/hosts); without it the command sees the host's
// /etc/hosts, and Barn would publish a namespaced lab's names host-wide.
// Barn therefore proves, before it writes, that the hosts file belongs to
// the network namespace it runs in:
//
//   - in a named namespace NS (this process's network namespace is the one
//     <RunDir>/netns/NS pins), the file must be <EtcDir>/netns/NS/hosts
//     itself (same device and inode: the bind mount is in effect);
//   - in an unnamed namespace other than PID 1's (unshare --net), the file
//     must not be the one PID 1 sees (<ProcDir>/1/root<path>);
//   - in PID 1's network namespace (a workstation, a container) any file is
//     the namespace's own.
//
// Refusals are conflict (4), reason hosts_not_namespaced, naming the
// namespace and the file to create.

// procDir is <ProcDir>, /proc by default.
func (h *Host) procDir() string { return or(h.ProcDir, "/proc") }

// NetNamespace names this process's network namespace: "" when it is not
// one of <RunDir>/netns/* (PID 1's, or an unnamed one), and whether it is
// PID 1's. initial is also true when PID 1's namespace cannot be read (an
// unprivileged process) and the namespace has no name.
func (h *Host) NetNamespace() (name string, initial bool) {
	self, err := os.Stat(filepath.Join(h.procDir(), "self", "ns", "net"))
	if err != nil {
		return "", true // no /proc namespaces: nothing to tell apart
	}
	pins, _ := filepath.Glob(filepath.Join(h.RunDir, "netns", "*"))
	for _, p := range pins {
		if fi, err := os.Stat(p); err == nil && os.SameFile(fi, self) {
			name = filepath.Base(p)
			break
		}
	}
	init, err := os.Stat(filepath.Join(h.procDir(), "1", "ns", "net"))
	if err != nil {
		return name, name == ""
	}
	return name, os.SameFile(init, self)
}

// checkHostsNamespaced refuses to write path when it is not the hosts file
// of the network namespace Barn runs in (see above).
func (h *Host) checkHostsNamespaced(path string) error {
	name, initial := h.NetNamespace()
	switch {
	case name != "":
		own := filepath.Join(h.EtcDir, "netns", name, "hosts")
		ownFi, err := os.Stat(own)
		if errors.Is(err, fs.ErrNotExist) {
			return exitcode.New(exitcode.Conflict, "barn-net runs in network namespace %s, but %s does not exist, so %s is the host's own file; create %s (ip netns exec bind-mounts it over /etc/hosts) and run again",
				name, own, path, own).WithReason("hosts_not_namespaced").WithNext("cp /etc/hosts " + own)
		}
		if fi, err := os.Stat(path); err == nil && ownFi != nil && os.SameFile(fi, ownFi) {
			return nil
		}
		return exitcode.New(exitcode.Conflict, "barn-net runs in network namespace %s, but %s is not that namespace's hosts file %s (enter the namespace with ip netns exec %s)",
			name, path, own, name).WithReason("hosts_not_namespaced")
	case initial:
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil // a file that does not exist here is nobody else's
	}
	if hostFi, err := os.Stat(filepath.Join(h.procDir(), "1", "root", path)); err == nil && os.SameFile(fi, hostFi) {
		return exitcode.New(exitcode.Conflict, "barn-net runs in a network namespace of its own, but %s is the host's file (PID 1 sees the same one); give the namespace its own hosts file (a mount namespace with one bind-mounted over %s, or a named namespace with /etc/netns/NAME/hosts)",
			path, path).WithReason("hosts_not_namespaced")
	}
	return nil
}
