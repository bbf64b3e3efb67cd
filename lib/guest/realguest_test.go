package guest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"barn.dev/lib/cidata"
	"barn.dev/lib/hostshare"
	"barn.dev/lib/imageref"
	"barn.dev/lib/qemu"
	"barn.dev/lib/spec"
	"barn.dev/lib/sshkeys"
	"barn.dev/lib/state"
)

// realImage finds the BIOS layout (d12-bios) of the Debian 12 cloud-init
// image built by scripts/build-image.sh (BARN_TEST_IMAGE overrides); this
// test boots it without firmware (the lab suite boots the UEFI layout).
func realImage() string {
	if p := os.Getenv("BARN_TEST_IMAGE"); p != "" {
		return p
	}
	// The newest build wins (the cache directories are named by hash, so
	// the lexical order says nothing about age).
	m, _ := filepath.Glob("/var/cache/barn/images/*/repo/images/d12-bios-*-amd64.qcow2")
	newest, at := "", time.Time{}
	for _, p := range m {
		if fi, err := os.Stat(p); err == nil && fi.ModTime().After(at) {
			newest, at = p, fi.ModTime()
		}
	}
	return newest
}

func sh(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestRealGuest boots the real image under TCG inside a network namespace
// this test creates (bridge barn0 10.10.10.1/24), with this package's seed,
// and proves the guest contract end to end.
func TestRealGuest(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the real-guest boot (minutes under TCG)")
	}
	if os.Geteuid() != 0 {
		t.Skip("not root: cannot create a network namespace, bridge and tap")
	}
	img := realImage()
	if img == "" {
		t.Skip("no guest image: run scripts/build-image.sh (or set BARN_TEST_IMAGE)")
	}
	qbin, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Skip("qemu-system-x86_64 not installed")
	}
	t.Logf("accelerator: TCG (software emulation, explicitly requested by this test); image %s", img)

	dir := t.TempDir()
	ns := fmt.Sprintf("barn-gt-%d", os.Getpid())
	sh(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	in := func(args ...string) string { return sh(t, "ip", append([]string{"netns", "exec", ns}, args...)...) }
	in("ip", "link", "set", "lo", "up")
	in("ip", "link", "add", "barn0", "type", "bridge")
	in("ip", "addr", "add", "10.10.10.1/24", "dev", "barn0")
	in("ip", "link", "set", "barn0", "up")
	in("ip", "tuntap", "add", "tap-meta", "mode", "tap")
	in("ip", "link", "set", "tap-meta", "master", "barn0")
	in("ip", "link", "set", "tap-meta", "up")

	// Shares: a read-only one holding a file written on the host, and a
	// writable one whose host directory is a read-only bind mount (the
	// guest cannot write it: the share stage must fall back to read-only
	// with a warning).
	roShare, rwShare := filepath.Join(dir, "share-ro"), filepath.Join(dir, "share-rw")
	rwSource := filepath.Join(dir, "share-rw-source")
	for _, p := range []string{roShare, rwShare, rwSource} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(roShare, "hello.txt"), []byte("written on the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sh(t, "mount", "--bind", rwSource, rwShare)
	t.Cleanup(func() { _ = exec.Command("umount", "-l", rwShare).Run() })
	sh(t, "mount", "-o", "remount,bind,ro", rwShare)

	keys, err := sshkeys.Ensure(filepath.Join(dir, "keys"), false)
	if err != nil {
		t.Fatal(err)
	}
	d := spec.Deployment{Name: "barn", Arch: "amd64", Image: "d12:stable",
		Subnet: spec.Subnet{CIDR: "10.10.10.0/24", Host: "10.10.10.1", Reserved: "10.10.10.2-10.10.10.8", Pool: "10.10.10.9-10.10.10.254"},
		User:   spec.User{Name: "dba", UID: 88}}
	node := spec.Node{Name: "meta", Address: "10.10.10.10", Control: true,
		MAC:   spec.NICs{Management: "52:54:00:0a:0a:0a", Private: "52:54:01:0a:0a:0a"},
		Image: "d12:stable", CPUs: 2, MemoryBytes: 1 << 30, RootDiskBytes: 4 << 30,
		Disks:   []spec.Disk{{Name: "data", Mount: "/data", SizeBytes: 1 << 30, FS: "auto", Serial: "datadiskserialaaaaaa"}},
		Aliases: []string{"infra"}, Shares: []spec.Share{
			{Host: roShare, Guest: "/srv/ro", Readonly: true, Tag: "barn-00000000000000000001"},
			{Host: rwShare, Guest: "/srv/rw", Readonly: false, Tag: "barn-00000000000000000002"},
		}}
	node.SpecHash = spec.NodeHash(d, node)
	priv, _ := keys.PrivateKeyPEM()
	files, err := cidata.Render(cidata.Input{Deployment: d, Node: node, Peers: []spec.Node{node}, Generation: 1, PublicKey: keys.Public, ControlPrivateKey: string(priv)})
	if err != nil {
		t.Fatal(err)
	}
	seed := filepath.Join(dir, "seed.iso")
	if err := cidata.WriteISO(seed, files); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "root.qcow2")
	sh(t, "qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", img, root)
	data := filepath.Join(dir, "data.qcow2")
	sh(t, "qemu-img", "create", "-q", "-f", "qcow2", data, "1G")

	vmUUID := uuid.NewString()
	rt := state.Runtime{Directory: dir, QMP: filepath.Join(dir, "qmp.sock"), BarnQMP: filepath.Join(dir, "barn-qmp.sock"), Pidfile: filepath.Join(dir, "qemu.pid")}
	serial := filepath.Join(dir, "serial.log")
	inv, err := qemu.Invocation(qemu.Input{Node: node, VMUUID: vmUUID, Image: imageBIOS(), RootDisk: root, Base: img,
		DataDisks: []state.DataDisk{{Name: "data", Path: data, Serial: "datadiskserialaaaaaa", SizeBytes: 1 << 30, Mount: "/data", RequestedFilesystem: "auto"}},
		Seed:      seed, SSHPort: 2222, Runtime: rt, SerialLog: serial,
		Shares: []qemu.ShareFD{{Tag: node.Shares[0].Tag, FD: 3, Readonly: true}, {Tag: node.Shares[1].Tag, FD: 4}}},
		qemu.Profile{Binary: qbin, Accel: "tcg", Machine: "q35", CPU: "max", Bridge: "barn0", BridgeHelper: "/usr/lib/qemu/qemu-bridge-helper", PrivateNet: "bridge"})
	if err != nil {
		t.Fatal(err)
	}
	// The namespace has no qemu-bridge-helper ACL; attach the private NIC
	// to a tap this test enslaved to barn0 instead.
	args := append([]string{}, inv.Args...)
	for i, a := range args {
		if strings.HasPrefix(a, "bridge,id=private") {
			args[i] = "tap,id=private,ifname=tap-meta,script=no,downscript=no"
		}
	}
	// The share directories are opened once, checked on the descriptor,
	// and inherited by QEMU at fds 3 and 4 (what lib/lifecycle does).
	shareFiles, err := hostshare.OpenAll(node.Name, node.Shares, hostshare.DefaultOptions(filepath.Join(dir, "barn-home")))
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.InheritedFiles) != 2 || inv.InheritedFiles[0].FD != 3 || inv.InheritedFiles[1].FD != 4 {
		t.Fatalf("inherited files = %+v", inv.InheritedFiles)
	}
	launched := time.Now()
	qcmd := exec.Command("ip", append([]string{"netns", "exec", ns, inv.Binary}, args...)...)
	qcmd.ExtraFiles = shareFiles
	if out, err := qcmd.CombinedOutput(); err != nil {
		t.Fatalf("launching QEMU: %v\n%s", err, out)
	}
	hostshare.CloseAll(shareFiles)
	t.Cleanup(func() {
		if b, err := os.ReadFile(rt.Pidfile); err == nil {
			var pid int
			if _, err := fmt.Sscan(string(b), &pid); err == nil && pid > 1 {
				if p, err := os.FindProcess(pid); err == nil {
					_ = p.Kill()
				}
			}
		}
		if t.Failed() {
			if b, err := os.ReadFile(serial); err == nil {
				t.Logf("serial log tail:\n%s", tail(string(b), 60))
			}
		}
	})
	wrapper := filepath.Join(dir, "ssh-in-ns")
	if err := os.WriteFile(wrapper, []byte("#!/bin/sh\nexec ip netns exec "+ns+" ssh \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tg := Target{Node: "meta", Port: 2222, User: "dba", Keys: keys, VMUUID: vmUUID, Generation: 1, SpecHash: node.SpecHash, SSH: wrapper}

	ctx := context.Background()
	// 12 min: under TCG on a 2-core host shared with other test VMs, boot
	// alone took 4–5 min.
	r, err := WaitReady(ctx, tg, 12*time.Minute)
	if err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	t.Logf("ready %s after launch (TCG), %d probes; warnings %v; repairs %v; disks %v", time.Since(launched).Round(time.Second), r.Probes, r.Warnings, r.Repairs, r.Disks)
	// Exactly one warning: the writable share the guest cannot write.
	if len(r.Warnings) != 1 || r.Warnings[0].Stage != "shares" ||
		!strings.Contains(r.Warnings[0].Detail, "/srv/rw: the writable share is not writable by the guest; mounted read-only") {
		t.Errorf("warnings = %+v, want one shares warning for /srv/rw", r.Warnings)
	}
	if len(r.Disks) != 1 || r.Disks[0].Filesystem != "xfs" {
		t.Errorf("disks = %v, want data as xfs", r.Disks)
	}

	exe := func(argv ...string) (int, string) {
		var out, errb bytes.Buffer
		code, err := Run(ctx, execArgv(t, tg, argv), Streams{Out: &out, Err: &errb})
		if err != nil {
			t.Fatal(err)
		}
		return code, out.String() + errb.String()
	}
	// The private NIC (found by MAC) carries exactly the planned address
	// and owns no default route.
	_, ifs := exe("sh", "-c", `for d in /sys/class/net/*; do [ "$(cat $d/address)" = 52:54:01:0a:0a:0a ] && echo ${d##*/}; done`)
	privIf := strings.TrimSpace(ifs)
	if privIf == "" || strings.Contains(privIf, "\n") {
		t.Fatalf("private interface by MAC: %q", ifs)
	}
	if _, out := exe("ip", "-4", "-o", "addr", "show", "dev", privIf); !strings.Contains(out, " 10.10.10.10/24 ") {
		t.Errorf("private address on %s: %s", privIf, out)
	}
	if _, out := exe("ip", "-4", "route", "show", "default", "dev", privIf); strings.TrimSpace(out) != "" {
		t.Errorf("private interface owns a default route: %s", out)
	}
	// The host side reaches the planned IP on the bridge.
	in("ping", "-c", "1", "-W", "5", "10.10.10.10")
	if _, out := exe("cat", "/etc/hosts"); !strings.Contains(out, "# BEGIN BARN HOSTS\n10.10.10.10\tmeta infra\n# END BARN HOSTS") {
		t.Errorf("/etc/hosts block missing:\n%s", out)
	}
	if _, out := exe("findmnt", "-no", "FSTYPE", "/data"); strings.TrimSpace(out) != "xfs" {
		t.Errorf("/data fs = %q", out)
	}
	// The read-only share: the host's file is readable, writing fails
	// (even as root), and nothing reaches the host.
	if code, out := exe("cat", "/srv/ro/hello.txt"); code != 0 || out != "written on the host\n" {
		t.Errorf("read-only share: cat = %d %q", code, out)
	}
	if _, out := exe("findmnt", "-no", "FSTYPE,OPTIONS", "/srv/ro"); !isReadOnly9p(out) {
		t.Errorf("read-only share mount: %q", out)
	}
	if code, out := exe("sudo", "-n", "sh", "-c", "echo x > /srv/ro/from-guest"); code == 0 {
		t.Errorf("writing the read-only share succeeded: %q", out)
	}
	if _, err := os.Stat(filepath.Join(roShare, "from-guest")); !os.IsNotExist(err) {
		t.Errorf("a guest write reached the host: %v", err)
	}
	// The writable share fell back to read-only, and fstab keeps it so.
	if _, out := exe("findmnt", "-no", "FSTYPE,OPTIONS", "/srv/rw"); !isReadOnly9p(out) {
		t.Errorf("fallback share mount: %q", out)
	}
	if _, out := exe("grep", "-A3", "# BEGIN BARN SHARES", "/etc/fstab"); !strings.Contains(out, "barn-00000000000000000001 /srv/ro 9p ") ||
		!strings.Contains(out, "barn-00000000000000000002 /srv/rw 9p version=9p2000.L,trans=virtio,cache=none,msize=262144,access=client,nofail,nodev,nosuid,ro 0 0") {
		t.Errorf("fstab shares block:\n%s", out)
	}
	if code, out := exe("sh", "-c", `printf '%s|' "$@"; exit 37`, "x", "a b", ""); code != 37 || out != "a b||" {
		t.Errorf("exec: status %d output %q", code, out)
	}
	if _, out := exe("sh", "-c", "id -u; id -g; id -gn; ls -l ~/.ssh/id_ed25519"); !strings.HasPrefix(out, "88\n88\nadmin\n-rw-------") {
		t.Errorf("identity/control key: %q", out)
	}
	if b, err := os.ReadFile(serial); err == nil {
		t.Logf("serial log: %d bytes; finalize lines:\n%s", len(b), grepLines(string(b), "barn-finalize"))
	}

	// Fault: break the required identity contract, re-run a stage; the
	// readiness check reports the failed stage by name.
	if code, out := exe("sudo", "-n", "usermod", "-s", "/bin/sh", "dba"); code != 0 {
		t.Fatalf("usermod: %d %s", code, out)
	}
	if err := RunStages(ctx, tg, []string{"hosts"}); err != nil {
		t.Fatalf("RunStages: %v", err)
	}
	_, err = WaitReady(ctx, tg, time.Minute)
	if err == nil || !strings.Contains(err.Error(), "guest bootstrap failed during identity: login user dba has shell /bin/sh") {
		t.Fatalf("fault case: err = %v", err)
	}
}

// isReadOnly9p reads findmnt's "FSTYPE OPTIONS" columns (padded).
func isReadOnly9p(out string) bool {
	f := strings.Fields(out)
	return len(f) == 2 && f[0] == "9p" && strings.HasPrefix(f[1], "ro,")
}

func imageBIOS() imageref.Identity { return imageref.Identity{Boot: "bios"} }

func tail(s string, n int) string {
	l := strings.Split(s, "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
