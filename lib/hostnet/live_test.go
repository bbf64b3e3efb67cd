package hostnet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/testexec"
	"barn.dev/lib/wire"
)

// Live tests run their body inside a network namespace they create
// (ip netns add barn-test-…) by re-executing the test binary under
// `ip netns exec`, which also gives the child a private mount namespace. In
// there /etc is overlaid with a temporary upper layer, so the real
// qemu-bridge-helper (which reads the compiled-in /etc/qemu/bridge.conf)
// sees the test's bridge.conf while the host's /etc is untouched. The helper
// itself is a root-owned copy in a temp dir, so the setuid step never touches
// /usr/lib/qemu.

const inNSEnv = "BARN_NET_TEST_NETNS"

type liveEnv struct {
	dir  string
	host *Host
}

func live(t *testing.T, body func(t *testing.T, e *liveEnv)) {
	t.Helper()
	if ns := os.Getenv(inNSEnv); ns != "" {
		body(t, setupInside(t))
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("live network tests need root to create a network namespace (ip netns add)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("live network tests need iproute2 (ip): " + err.Error())
	}
	name := fmt.Sprintf("barn-test-%d-%s", os.Getpid(), strings.ToLower(t.Name()[len("TestLive"):]))
	if len(name) > 30 {
		name = name[:30]
	}
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	defer exec.Command("ip", "netns", "del", name).Run()
	// What the host's /etc/qemu holds must be exactly as before: the child
	// works in an overlay.
	hostBefore := etcQemuFiles(t)
	defer func() {
		if after := etcQemuFiles(t); !reflect.DeepEqual(hostBefore, after) {
			t.Errorf("the host's /etc/qemu changed during the test:\nbefore %q\nafter  %q", hostBefore, after)
		}
	}()
	cmd := exec.Command("ip", "netns", "exec", name, os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), inNSEnv+"="+name)
	out, err := cmd.CombinedOutput()
	t.Logf("inside netns %s:\n%s", name, out)
	if err != nil {
		t.Fatalf("test body in netns %s failed: %v", name, err)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("test body in netns %s did not pass (skipped?)", name)
	}
}

// etcQemuFiles describes each file of the host's /etc/qemu: name, mode,
// size, modification time and content. A missing /etc/qemu and an empty
// one read the same: `make ci`'s lab suites create the empty directory
// beside this test, as the mount point `ip netns exec` binds over.
func etcQemuFiles(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("/etc/qemu")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		p := filepath.Join("/etc/qemu", e.Name())
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(p) // a directory reads as nothing
		files = append(files, fmt.Sprintf("%s %v %d %s %q", e.Name(), fi.Mode(), fi.Size(), fi.ModTime().UTC().Format(time.RFC3339Nano), b))
	}
	return files
}

func setupInside(t *testing.T) *liveEnv {
	dir, err := os.MkdirTemp("", "barn-net-live-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	must(t, os.Chmod(dir, 0o755))
	for _, d := range []string{"upper", "work", "state", "bin"} {
		must(t, os.Mkdir(filepath.Join(dir, d), 0o755))
	}
	// Private /etc: overlay with a temp upper layer (this mount namespace only).
	overlayEtc(t, dir)
	must(t, os.RemoveAll("/etc/qemu")) // a whiteout in the upper layer only
	helper := filepath.Join(dir, "bin", "qemu-bridge-helper")
	src := HelperPaths[0]
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatalf("live tests need the real %s: %v", src, err)
	}
	must(t, testexec.WriteScript(helper, b))
	must(t, os.Chmod(helper, 0o755))
	must(t, exec.Command("ip", "link", "set", "lo", "up").Run())
	// barn-net's locks go to the test's own run directory; the named
	// namespaces it reads there are the host's.
	must(t, os.MkdirAll(filepath.Join(dir, "run"), 0o755))
	must(t, os.Symlink("/run/netns", filepath.Join(dir, "run", "netns")))
	h := FromEnv(func(k string) string {
		return map[string]string{"BARN_NET_STATE": filepath.Join(dir, "state"), "BARN_NET_HELPER": helper, "BARN_NET_RUN": filepath.Join(dir, "run")}[k]
	})
	h.Runner = failRunner{}
	return &liveEnv{dir: dir, host: h}
}

// failRunner stands in for nmcli/systemctl: nothing of them runs here.
type failRunner struct{}

func (failRunner) Run(ctx context.Context, argv []string) ([]byte, error) {
	return nil, fmt.Errorf("%s: not available in the test namespace", argv[0])
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func sh(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%v: %v: %s", args, err, out)
	}
}

// snapshot is the observable prestate: links, addresses, routes, the files
// Barn may touch, and their modes/owners/contents.
type snapshot struct {
	Links    []LinkInfo
	Routes   []RouteInfo
	QemuDir  FileState
	Conf     FileState
	Helper   FileState
	Manifest FileState
}

func snap(t *testing.T, h *Host) snapshot {
	t.Helper()
	var s snapshot
	var err error
	s.Links, err = h.Link.Links()
	must(t, err)
	s.Routes, err = h.Link.Routes()
	must(t, err)
	for _, f := range []struct {
		dst  *FileState
		path string
	}{{&s.QemuDir, h.QemuConfDir()}, {&s.Conf, h.BridgeConf()}, {&s.Helper, h.Helper}, {&s.Manifest, h.ManifestPath()}} {
		*f.dst, err = StatFile(f.path, f.path != h.Helper)
		must(t, err)
	}
	return s
}

func sameSnap(t *testing.T, what string, before, after snapshot) {
	t.Helper()
	if !reflect.DeepEqual(before, after) {
		b, _ := wire.MarshalIndent(before)
		a, _ := wire.MarshalIndent(after)
		t.Fatalf("%s: host state differs from the prestate\nbefore: %s\nafter:  %s", what, b, a)
	}
}

func install(t *testing.T, h *Host) (Plan, error) {
	t.Helper()
	ctx := context.Background()
	o, err := h.Inspect(ctx)
	must(t, err)
	p, err := h.PlanInstall(o, Options{})
	if err != nil {
		return p, err
	}
	_, err = h.Apply(ctx, p, Options{}, func(s string) { t.Log(s) })
	return p, err
}

func classOf(err error) exitcode.Class { return exitcode.ClassOf(err) }

func TestLiveInstallAttachNoopUninstall(t *testing.T) {
	live(t, func(t *testing.T, e *liveEnv) {
		h := e.host
		ctx := context.Background()
		before := snap(t, h)
		if _, err := h.Preflight(ctx, "", ""); classOf(err) != exitcode.Capability {
			t.Fatalf("preflight before install: want capability, got %v", err)
		}
		p, err := install(t, h)
		if err != nil {
			t.Fatalf("install: %v", err)
		}
		if p.Backend != BackendNetlink {
			t.Fatalf("backend %q, want netlink (no NetworkManager, no systemd here)", p.Backend)
		}
		var ids []string
		for _, s := range p.Steps {
			ids = append(ids, s.ID)
		}
		if got := strings.Join(ids, ","); got != "write-manifest,bridge-add,addr-add,link-up,qemu-dir,bridge-conf,helper-setuid,attach-proof" {
			t.Fatalf("steps %s", got)
		}
		// Installed state: bridge up with .1/24, ACL block, setuid helper, manifest 0600 installed.
		r, err := h.Preflight(ctx, "", "")
		if err != nil || !r.Usable || len(r.Findings) != 0 {
			t.Fatalf("preflight after install: usable=%v findings=%v err=%v", r.Usable, r.Findings, err)
		}
		st, _ := StatFile(h.Helper, false)
		if st.Mode != "4755" {
			t.Fatalf("helper mode %s, want 4755", st.Mode)
		}
		m, err := h.ReadManifest()
		if err != nil || m == nil || m.Status != StatusInstalled || m.Applied != len(p.Steps) {
			t.Fatalf("manifest %+v err %v", m, err)
		}
		if m.Prestate.Helper.Mode != "0755" || m.Prestate.QemuDir.Exists {
			t.Fatalf("prestate %+v", m.Prestate)
		}
		conf, _ := os.ReadFile("/etc/qemu/bridge.conf")
		if string(conf) != ManagedBlock("barn0", h.ManifestPath()) {
			t.Fatalf("bridge.conf = %q", conf)
		}
		// The readiness proof again, on its own, as nobody: a tap joins barn0.
		h.AttachUID, h.AttachGID = 65534, 65534
		if err := ProveAttach(ctx, h, &p); err != nil {
			t.Fatalf("attach proof as nobody: %v", err)
		}
		// Second install: a no-op that changes nothing.
		mid := snap(t, h)
		o, _ := h.Inspect(ctx)
		p2, err := h.PlanInstall(o, Options{})
		if err != nil || !p2.Noop {
			t.Fatalf("second plan: noop=%v err=%v", p2.Noop, err)
		}
		if _, err := h.Apply(ctx, p2, Options{}, nil); err != nil {
			t.Fatal(err)
		}
		sameSnap(t, "second install", mid, snap(t, h))
		// Status reflects it.
		s, err := h.Status(ctx, "")
		if err != nil || !s.Installed || !s.Usable || s.Backend != BackendNetlink || len(s.Attached) != 0 {
			t.Fatalf("status %+v err %v", s, err)
		}
		// Uninstall restores the prestate exactly.
		if _, err := h.Uninstall(ctx, func(s string) { t.Log(s) }); err != nil {
			t.Fatalf("uninstall: %v", err)
		}
		sameSnap(t, "uninstall", before, snap(t, h))
		if _, err := os.Stat("/etc/qemu"); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("/etc/qemu should be gone again: %v", err)
		}
	})
}

func TestLiveOccupiedSubnetRefused(t *testing.T) {
	live(t, func(t *testing.T, e *liveEnv) {
		h := e.host
		sh(t, "ip", "link", "add", "eth9", "type", "veth", "peer", "name", "eth9p")
		sh(t, "ip", "addr", "add", "10.10.10.5/24", "dev", "eth9")
		sh(t, "ip", "link", "set", "eth9", "up")
		before := snap(t, h)
		_, err := install(t, h)
		if classOf(err) != exitcode.Resource || !strings.Contains(err.Error(), "already in use by eth9") {
			t.Fatalf("want resource 'already in use by eth9', got %v", err)
		}
		if xe := exitcode.As(err); xe.Next != "barn-net plan --cidr 10.10.20.0/24" {
			t.Fatalf("next %q", xe.Next)
		}
		sameSnap(t, "refused install", before, snap(t, h))
		// A route (no address) on the /24 through another link is refused too.
		sh(t, "ip", "addr", "flush", "dev", "eth9")
		sh(t, "ip", "route", "add", "10.10.10.0/25", "dev", "eth9")
		if _, err := install(t, h); classOf(err) != exitcode.Resource || !strings.Contains(err.Error(), "already in use by eth9") {
			t.Fatalf("route: want resource, got %v", err)
		}
		// A pre-existing foreign barn0 is not adopted.
		sh(t, "ip", "route", "flush", "dev", "eth9")
		sh(t, "ip", "link", "add", "barn0", "type", "bridge")
		if _, err := install(t, h); classOf(err) != exitcode.Conflict || !strings.Contains(err.Error(), "refusing to adopt") {
			t.Fatalf("foreign bridge: want conflict, got %v", err)
		}
	})
}

func TestLiveModifiedOwnedFileBlocksUninstall(t *testing.T) {
	live(t, func(t *testing.T, e *liveEnv) {
		h := e.host
		ctx := context.Background()
		must(t, os.MkdirAll("/etc/qemu", 0o755))
		must(t, os.WriteFile("/etc/qemu/bridge.conf", []byte("allow br7\n"), 0o640))
		before := snap(t, h)
		if _, err := install(t, h); err != nil {
			t.Fatal(err)
		}
		good, _ := os.ReadFile("/etc/qemu/bridge.conf")
		if string(good) != "allow br7\n"+ManagedBlock("barn0", h.ManifestPath()) {
			t.Fatalf("bridge.conf %q", good)
		}
		must(t, os.WriteFile("/etc/qemu/bridge.conf", append(append([]byte{}, good...), "allow all\n"...), 0o640))
		// status reports what blocks uninstall before anyone tries it.
		st, err := h.Status(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if f := findingOf(st.Findings, "owned_file_modified"); f == nil || !strings.Contains(f.Message, "/etc/qemu/bridge.conf") {
			t.Fatalf("status findings %+v: want owned_file_modified naming /etc/qemu/bridge.conf", st.Findings)
		}
		_, err = h.Uninstall(ctx, nil)
		if classOf(err) != exitcode.Integrity || exitcode.As(err).Reason != "owned_file_modified" {
			t.Fatalf("want integrity owned_file_modified, got %v", err)
		}
		// Nothing was removed: the bridge is still there.
		if linkNamed(t, h, "barn0") == nil {
			t.Fatal("refused uninstall removed the bridge")
		}
		must(t, os.WriteFile("/etc/qemu/bridge.conf", good, 0o640))
		if _, err := h.Uninstall(ctx, nil); err != nil {
			t.Fatal(err)
		}
		sameSnap(t, "uninstall after repair", before, snap(t, h))
	})
}

// linkNamed is the link called name, nil when there is none.
func linkNamed(t *testing.T, h *Host, name string) *LinkInfo {
	t.Helper()
	links, err := h.Link.Links()
	must(t, err)
	for i := range links {
		if links[i].Name == name {
			return &links[i]
		}
	}
	return nil
}

// TestLiveForeignBridgeKeptByUninstall: Barn's bridge vanished (a reboot,
// or someone deleted it) and another barn0 took its name, first a plain
// one, then one forged with Barn's recorded MAC and alias. Uninstall
// deletes neither (the old undo deleted any link named barn0), says what
// it kept and how to look at it, and still restores every file.
func TestLiveForeignBridgeKeptByUninstall(t *testing.T) {
	for _, forge := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "forged MAC and alias"}[forge], func(t *testing.T) {
			live(t, func(t *testing.T, e *liveEnv) {
				h := e.host
				ctx := context.Background()
				before := snap(t, h)
				if _, err := install(t, h); err != nil {
					t.Fatal(err)
				}
				m, err := h.ReadManifest()
				must(t, err)
				id := m.Created.Bridge
				barns := linkNamed(t, h, "barn0")
				if id == nil || barns == nil || id.Index != barns.Index || id.MAC != barns.MAC || barns.Alias != id.Alias || id.Alias == "" {
					t.Fatalf("recorded identity %+v, link %+v", id, barns)
				}
				sh(t, "ip", "link", "del", "barn0")
				sh(t, "ip", "link", "add", "barn0", "type", "bridge")
				if forge {
					sh(t, "ip", "link", "set", "barn0", "address", id.MAC)
					sh(t, "ip", "link", "set", "barn0", "alias", id.Alias)
				}
				sh(t, "ip", "addr", "add", "192.168.77.1/24", "dev", "barn0")
				sh(t, "ip", "link", "set", "barn0", "up")
				foreign := linkNamed(t, h, "barn0")
				p, err := h.Uninstall(ctx, func(s string) { t.Log(s) })
				if err != nil {
					t.Fatal(err)
				}
				want := fmt.Sprintf("ifindex %d, recorded %d", foreign.Index, id.Index)
				if !notesContain(p, "kept: barn0 is not the bridge Barn created", want, "next: ip -d link show barn0") {
					t.Fatalf("notes %q: want the kept bridge, %q and a next: hint", p.Notes, want)
				}
				after := linkNamed(t, h, "barn0")
				if after == nil || after.Index != foreign.Index || !slices.Contains(after.Addrs, "192.168.77.1/24") {
					t.Fatalf("the foreign barn0 was touched: %+v", after)
				}
				sh(t, "ip", "link", "del", "barn0")
				sameSnap(t, "uninstall that kept the foreign bridge", before, snap(t, h))
			})
		})
	}
}

// TestLiveNetlinkRebootNoteIsTrue: the netlink plan's note on reboots says
// what to do once the bridge is gone; doing exactly that works, and
// install alone does not repair (the old note promised it would).
func TestLiveNetlinkRebootNoteIsTrue(t *testing.T) {
	live(t, func(t *testing.T, e *liveEnv) {
		h := e.host
		ctx := context.Background()
		p, err := install(t, h)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(p.Notes, NoteNetlinkReboot) {
			t.Fatalf("notes %q", p.Notes)
		}
		sh(t, "ip", "link", "del", "barn0") // what a reboot does to it
		if _, err := install(t, h); exitcode.As(err) == nil || exitcode.As(err).Reason != "installed_drifted" {
			t.Fatalf("install over a vanished bridge: %v (the note must not promise a repair)", err)
		}
		if _, err := h.Uninstall(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := install(t, h); err != nil {
			t.Fatal(err)
		}
		if l := linkNamed(t, h, "barn0"); l == nil || !slices.Contains(l.Addrs, "10.10.10.1/24") {
			t.Fatalf("barn0 after uninstall and install: %+v", l)
		}
		if _, err := h.Uninstall(ctx, nil); err != nil {
			t.Fatal(err)
		}
	})
}

func findingOf(fs []Finding, code string) *Finding {
	for i := range fs {
		if fs[i].Code == code {
			return &fs[i]
		}
	}
	return nil
}

func TestLiveAttachedTapBlocksUninstall(t *testing.T) {
	live(t, func(t *testing.T, e *liveEnv) {
		h := e.host
		ctx := context.Background()
		before := snap(t, h)
		if _, err := install(t, h); err != nil {
			t.Fatal(err)
		}
		sh(t, "ip", "tuntap", "add", "tap0", "mode", "tap")
		sh(t, "ip", "link", "set", "tap0", "master", "barn0")
		_, err := h.Uninstall(ctx, nil)
		if classOf(err) != exitcode.Conflict || !strings.Contains(err.Error(), "tap0") {
			t.Fatalf("want conflict naming tap0, got %v", err)
		}
		s, _ := h.Status(ctx, "")
		if !reflect.DeepEqual(s.Attached, []string{"tap0"}) {
			t.Fatalf("status attached %v", s.Attached)
		}
		sh(t, "ip", "link", "del", "tap0")
		if _, err := h.Uninstall(ctx, nil); err != nil {
			t.Fatal(err)
		}
		sameSnap(t, "uninstall after the tap left", before, snap(t, h))
	})
}

func TestLiveRollbackAtEachStep(t *testing.T) {
	live(t, func(t *testing.T, e *liveEnv) {
		h := e.host
		ctx := context.Background()
		must(t, os.MkdirAll("/etc/qemu", 0o750))
		must(t, os.WriteFile("/etc/qemu/bridge.conf", []byte("# site acl\nallow br7"), 0o600))
		before := snap(t, h)
		o, err := h.Inspect(ctx)
		must(t, err)
		p, err := h.PlanInstall(o, Options{})
		must(t, err)
		if len(p.Steps) != 8 { // no qemu-dir step (it exists), but qemu-dir-mode (0750 → 0755)
			t.Fatalf("steps: %d", len(p.Steps))
		}
		for _, s := range p.Steps {
			h.FailAfter = s.ID
			_, err := h.Apply(ctx, p, Options{}, nil)
			if err == nil || !strings.Contains(err.Error(), "injected failure after step "+s.ID) || !strings.Contains(err.Error(), "rolled back") {
				t.Fatalf("fail after %s: %v", s.ID, err)
			}
			sameSnap(t, "rollback after "+s.ID, before, snap(t, h))
		}
		// A real readiness failure: the site ACL denies barn0 through an
		// include, so the real helper refuses the attach and install rolls back.
		h.FailAfter = ""
		must(t, os.WriteFile("/etc/qemu/deny.conf", []byte("deny barn0\n"), 0o644))
		must(t, os.WriteFile("/etc/qemu/bridge.conf", []byte("include /etc/qemu/deny.conf\n# site acl\nallow br7"), 0o600))
		before = snap(t, h)
		o, _ = h.Inspect(ctx)
		p, _ = h.PlanInstall(o, Options{})
		_, err = h.Apply(ctx, p, Options{}, nil)
		if classOf(err) != exitcode.Capability || !strings.Contains(err.Error(), "readiness proof failed") {
			t.Fatalf("want a failed readiness proof, got %v", err)
		}
		t.Logf("readiness failure as reported: %v", err)
		sameSnap(t, "rollback after a real attach failure", before, snap(t, h))
	})
}

func TestLivePreflightMatrix(t *testing.T) {
	live(t, func(t *testing.T, e *liveEnv) {
		h := e.host
		h.UID = 1000 // judge access for an unprivileged user
		ctx := context.Background()
		good := func() {
			must(t, os.MkdirAll("/etc/qemu", 0o755))
			_ = os.Remove("/etc/qemu/bridge.conf")
			must(t, os.WriteFile("/etc/qemu/bridge.conf", []byte("allow barn0\n"), 0o644))
			must(t, chmodRaw(h.Helper, 0o4755))
			if linkNamed(t, h, "barn0") != nil {
				sh(t, "ip", "link", "del", "barn0")
			}
			{
				sh(t, "ip", "link", "add", "barn0", "type", "bridge")
				sh(t, "ip", "addr", "add", "10.10.10.1/24", "dev", "barn0")
				sh(t, "ip", "link", "set", "barn0", "up")
			}
		}
		good()
		if r, err := h.Preflight(ctx, "", ""); err != nil || !r.Usable {
			t.Fatalf("good host: %v %+v", err, r)
		}
		helper := h.Helper
		tun := filepath.Join(e.dir, "tun") // the kernel's root-only mode, as on a host without udev
		must(t, os.WriteFile(tun, nil, 0o600))
		cases := []struct {
			code   string
			fix    string
			break_ func()
		}{
			{FindHelperMissing, "apt-get install qemu-system-common", func() { h.Helper = helper + ".absent" }},
			{FindHelperNotSetuid, "barn-net install", func() { must(t, os.Chmod(helper, 0o755)) }},
			{FindBridgeConfMissing, "barn-net install", func() { must(t, os.Remove("/etc/qemu/bridge.conf")) }},
			{FindBridgeNotAllowed, "barn-net install", func() { must(t, os.WriteFile("/etc/qemu/bridge.conf", []byte("allow br7\n"), 0o644)) }},
			{FindBridgeConfBad, "barn-net install", func() { must(t, os.Chmod("/etc/qemu/bridge.conf", 0o600)) }},
			{FindBridgeAbsent, "barn-net install", func() { sh(t, "ip", "link", "del", "barn0") }},
			{FindBridgeDown, "barn-net install", func() { sh(t, "ip", "link", "set", "barn0", "down") }},
			{FindBridgeAddrMissing, "barn-net install", func() { sh(t, "ip", "addr", "flush", "dev", "barn0") }},
			{FindTunDenied, "chmod 0666 " + tun, func() { h.Tun = tun }},
		}
		seen := map[string]bool{}
		for _, c := range cases {
			h.Helper, h.Tun = helper, ""
			good()
			c.break_()
			r, err := h.Preflight(ctx, "", "")
			xe := exitcode.As(err)
			if xe == nil || xe.Class != exitcode.Capability || xe.Next != "barn-net install" || r.Usable {
				t.Fatalf("%s: want capability with next barn-net install, got %v", c.code, err)
			}
			if len(r.Findings) != 1 || r.Findings[0].Code != c.code || r.Findings[0].Fix != c.fix {
				t.Fatalf("%s: findings %+v", c.code, r.Findings)
			}
			if seen[r.Findings[0].Message] {
				t.Fatalf("%s: message not distinct", c.code)
			}
			seen[r.Findings[0].Message] = true
		}
		// Root is not blocked by a missing setuid bit: a warning, still usable.
		h.Helper, h.Tun = helper, ""
		good()
		must(t, os.Chmod(helper, 0o755))
		h.UID = 0
		if r, err := h.Preflight(ctx, "", ""); err != nil || !r.Usable || len(r.Findings) != 1 || r.Findings[0].Severity != SevWarning {
			t.Fatalf("root: %v %+v", err, r)
		}
	})
}
