package hostnet

import (
	"os"
	"path/filepath"
	"testing"

	"barn.dev/lib/exitcode"
)

// nsFixture is a /proc, /run and /etc whose namespace files are plain
// files: two hard links to one file are "the same namespace" (os.SameFile
// compares device and inode, as it does for the kernel's nsfs files).
type nsFixture struct {
	t                   *testing.T
	dir, self, pid1, ns string
	h                   *Host
}

func newNSFixture(t *testing.T) *nsFixture {
	t.Helper()
	d := t.TempDir()
	f := &nsFixture{t: t, dir: d, self: filepath.Join(d, "proc/self/ns/net"), pid1: filepath.Join(d, "proc/1/ns/net"),
		h: &Host{EtcDir: filepath.Join(d, "etc"), StateDir: filepath.Join(d, "state"), RunDir: filepath.Join(d, "run"), ProcDir: filepath.Join(d, "proc")}}
	for _, p := range []string{f.self, f.pid1, filepath.Join(d, "run/netns/x"), filepath.Join(d, "etc/x")} {
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	}
	must(t, os.WriteFile(f.self, []byte("self"), 0o644))
	must(t, os.WriteFile(f.pid1, []byte("init"), 0o644))
	must(t, os.WriteFile(f.h.HostsPath(), []byte("127.0.0.1\tlocalhost\n"), 0o644))
	return f
}

// named pins this process's namespace as <RunDir>/netns/NAME.
func (f *nsFixture) named(name string) {
	f.ns = filepath.Join(f.h.RunDir, "netns", name)
	_ = os.Remove(f.ns)
	must(f.t, os.Link(f.self, f.ns))
}

// initial makes this process's namespace PID 1's.
func (f *nsFixture) initial() {
	must(f.t, os.Remove(f.pid1))
	must(f.t, os.Link(f.self, f.pid1))
}

var entries = []HostEntry{{Address: "10.10.10.10", Names: []string{"pg-meta-1"}}}

func wantReason(t *testing.T, err error, reason string) {
	t.Helper()
	if e := exitcode.As(err); err == nil || e.Class != exitcode.Conflict || e.Reason != reason {
		t.Fatalf("got %v (%v), want conflict %s", err, e.Reason, reason)
	}
}

func TestHostsInNamedNamespaceNeedItsOwnFile(t *testing.T) {
	f := newNSFixture(t)
	f.named("barn-lab")
	if name, initial := f.h.NetNamespace(); name != "barn-lab" || initial {
		t.Fatalf("NetNamespace = %q, %v", name, initial)
	}
	before, _ := os.ReadFile(f.h.HostsPath())

	// no /etc/netns/NS/hosts: /etc/hosts is the host's; refused, untouched
	_, err := f.h.InstallHosts(entries)
	wantReason(t, err, "hosts_not_namespaced")
	if e := exitcode.As(err); e.Next != "cp /etc/hosts "+filepath.Join(f.h.EtcDir, "netns/barn-lab/hosts") {
		t.Errorf("next: %q", e.Next)
	}

	// the namespace's file exists, but the bind mount is not in effect
	own := filepath.Join(f.h.EtcDir, "netns/barn-lab/hosts")
	must(t, os.MkdirAll(filepath.Dir(own), 0o755))
	must(t, os.WriteFile(own, before, 0o644))
	_, err = f.h.InstallHosts(entries)
	wantReason(t, err, "hosts_not_namespaced")
	if after, _ := os.ReadFile(f.h.HostsPath()); string(after) != string(before) {
		t.Fatalf("the host's hosts file changed:\n%s", after)
	}
	if _, err := os.Stat(f.h.HostsManifestPath()); err == nil {
		t.Fatal("a refused install wrote a manifest")
	}

	// the bind mount in effect (the same file): written, and recorded
	must(t, os.Remove(f.h.HostsPath()))
	must(t, os.Link(own, f.h.HostsPath()))
	if _, err := f.h.InstallHosts(entries); err != nil {
		t.Fatal(err)
	}
	m, err := f.h.ReadHostsManifest()
	if err != nil || m == nil || m.Namespace != "barn-lab" {
		t.Fatalf("manifest %+v, %v; want namespace barn-lab", m, err)
	}

	// outside the namespace the path names another file: neither uninstall
	// nor a new install may act on the record, which stays
	must(t, os.Remove(f.ns))
	f.initial()
	_, err = f.h.UninstallHosts(true)
	wantReason(t, err, "hosts_other_namespace")
	if e := exitcode.As(err); e.Next != "ip netns exec barn-lab barn-net hosts uninstall" {
		t.Errorf("next: %q", e.Next)
	}
	_, err = f.h.InstallHosts(entries)
	wantReason(t, err, "hosts_other_namespace")
	if m, _ := f.h.ReadHostsManifest(); m == nil {
		t.Fatal("the manifest was removed from outside the namespace")
	}

	// back inside: removed exactly
	f.named("barn-lab")
	res, err := f.h.UninstallHosts(true)
	if err != nil || !res.Restored {
		t.Fatalf("uninstall: %+v, %v", res, err)
	}
	if after, _ := os.ReadFile(own); string(after) != string(before) {
		t.Fatalf("not restored:\n%s", after)
	}
}

func TestHostsInUnnamedNamespace(t *testing.T) {
	f := newNSFixture(t)
	if name, initial := f.h.NetNamespace(); name != "" || initial {
		t.Fatalf("NetNamespace = %q, %v", name, initial)
	}
	// PID 1 sees the very file: refused
	hostView := filepath.Join(f.h.ProcDir, "1/root", f.h.HostsPath())
	must(t, os.MkdirAll(filepath.Dir(hostView), 0o755))
	must(t, os.Link(f.h.HostsPath(), hostView))
	_, err := f.h.InstallHosts(entries)
	wantReason(t, err, "hosts_not_namespaced")
	// PID 1 sees another file (a private mount namespace's bind mount): allowed
	must(t, os.Remove(hostView))
	must(t, os.WriteFile(hostView, []byte("127.0.0.1\tlocalhost\n"), 0o644))
	if _, err := f.h.InstallHosts(entries); err != nil {
		t.Fatal(err)
	}
}

func TestHostsInPID1Namespace(t *testing.T) {
	f := newNSFixture(t)
	f.initial()
	if name, initial := f.h.NetNamespace(); name != "" || !initial {
		t.Fatalf("NetNamespace = %q, %v", name, initial)
	}
	if _, err := f.h.InstallHosts(entries); err != nil {
		t.Fatal(err)
	}
	if m, _ := f.h.ReadHostsManifest(); m == nil || m.Namespace != "" {
		t.Fatalf("manifest %+v", m)
	}
}
