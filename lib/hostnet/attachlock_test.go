package hostnet

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestQuietQEMUHolder: a QEMU given the node's MAC holds it from its
// first instant — paused here (-S), so its guest never sends a frame the
// bridge could learn nor answers an ARP probe. The guard finds it by its
// command line, names its PID, and stops finding it once it has exited. A
// QEMU whose NIC with that MAC is user-mode networking is on no bridge.
func TestQuietQEMUHolder(t *testing.T) {
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Skip("qemu-system-x86_64 is not installed")
	}
	const mac = "0a:ba:02:0a:0a:21"
	hw, _ := net.ParseMAC(mac)
	start := func(netdev string) *exec.Cmd {
		cmd := exec.Command(qemu, "-S", "-nodefaults", "-display", "none", "-machine", "q35",
			"-netdev", netdev, "-device", "virtio-net-pci,netdev=n0,mac="+mac)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	user := start("user,id=n0")
	if h, err := processHolder("10.10.10.21", "barn0", hw); err != nil || h != nil {
		t.Fatalf("a user-mode NIC with the MAC (pid %d): %+v, %v; want no holder", user.Process.Pid, h, err)
	}
	hub := start("hubport,id=n0,hubid=0") // a backend that may be anywhere: held
	got, err := CheckAddress(context.Background(), "barn0", "10.10.10.21", mac, Probe{})
	if err != nil || got.Holder == nil || got.Holder.How != "process" || got.Holder.PID != hub.Process.Pid {
		t.Fatalf("paused QEMU with the MAC: %+v, %v; want a process holder with pid %d", got, err, hub.Process.Pid)
	}
	xe := AddressInUse("pg-test-1", "barn0", mac, got.Holder)
	if xe.Reason != "address_in_use" || !containsAll(xe.Error(), mac, "10.10.10.21", "process") || !containsAll(xe.Next, "ps ", "-p") {
		t.Errorf("refusal %q next %q", xe.Error(), xe.Next)
	}
	_ = hub.Process.Kill()
	_ = hub.Wait()
	if h, err := processHolder("10.10.10.21", "barn0", hw); err != nil || h != nil {
		t.Fatalf("after the QEMU exited: %+v, %v; want no holder", h, err)
	}
}

// TestArgvHolds: a NIC with exactly the MAC, on the bridge or on a backend
// that may be a port of it, holds it; another bridge or SLIRP does not.
func TestArgvHolds(t *testing.T) {
	const m = "0a:ba:02:0a:0a:21"
	barn := []string{"-netdev", "bridge,id=private,br=barn0,helper=/usr/lib/qemu/qemu-bridge-helper", "-device", "virtio-net-pci,netdev=private,mac=" + m + ",bus=pcie.0"}
	for _, c := range []struct {
		name string
		args []string
		want bool
	}{
		{"Barn's private NIC", barn, true},
		{"upper-case MAC", []string{"-netdev", "bridge,id=p,br=barn0", "-device", "virtio-net-pci,netdev=p,mac=0A:BA:02:0A:0A:21"}, true},
		{"another bridge", []string{"-netdev", "bridge,id=p,br=barn1", "-device", "virtio-net-pci,netdev=p,mac=" + m}, false},
		{"the helper's default bridge br0", []string{"-netdev", "bridge,id=p", "-device", "virtio-net-pci,netdev=p,mac=" + m}, false},
		{"user-mode networking", []string{"-netdev", "user,id=p", "-device", "virtio-net-pci,netdev=p,mac=" + m}, false},
		{"a tap (may be a port)", []string{"-netdev", "tap,id=p,ifname=t0", "-device", "e1000,netdev=p,mac=" + m}, true},
		{"no backend named", []string{"-device", "virtio-net-pci,mac=" + m}, true},
		{"legacy -net nic", []string{"-net", "nic,macaddr=" + m + ",model=e1000"}, true},
		{"-nic user", []string{"-nic", "user,mac=" + m}, false},
		{"another MAC", []string{"-netdev", "bridge,id=p,br=barn0", "-device", "virtio-net-pci,netdev=p,mac=" + m + "0"}, false},
		{"the MAC in another key", []string{"-device", "virtio-net-pci,id=mac=" + m}, false},
		{"the MAC as a bare word (conservative)", []string{"-name", m}, true},
		{"dashes", []string{"-netdev", "bridge,id=p,br=barn0", "-device", "virtio-net-pci,netdev=p,mac=0a-ba-02-0a-0a-21"}, true},
		{"JSON", []string{"-netdev", `{"type":"bridge","id":"p","br":"barn0"}`, "-device", `{"driver":"virtio-net-pci","netdev":"p","mac":"0a:ba:02:0a:0a:21"}`}, true},
		{"JSON on another bridge", []string{"-netdev", `{"type":"bridge","id":"p","br":"barn1"}`, "-device", `{"driver":"virtio-net-pci","netdev":"p","mac":"0a:ba:02:0a:0a:21"}`}, false},
		{"-global", []string{"-global", "virtio-net-pci.mac=" + m}, true},
		{"-set", []string{"-set", "device.d.mac=" + m}, true},
		{"-nic on another bridge", []string{"-nic", "bridge,br=other,mac=" + m}, false},
		{"-nic on the bridge", []string{"-nic", "bridge,br=barn0,mac=" + m}, true},
		{"two -nic, the MAC's on another bridge", []string{"-nic", "bridge,br=other,mac=" + m, "-nic", "bridge,br=barn0,mac=0a:ba:02:0a:0a:99"}, false},
		{"type= bridge elsewhere", []string{"-netdev", "type=bridge,id=p,br=other", "-device", "virtio-net-pci,netdev=p,mac=" + m}, false},
		{"type= user", []string{"-netdev", "type=user,id=p", "-device", "virtio-net-pci,netdev=p,mac=" + m}, false},
		{"a bridge name with a comma", []string{"-netdev", "bridge,id=p,br=b,,r", "-device", "virtio-net-pci,netdev=p,mac=" + m}, false},
	} {
		if got := argvHolds(c.args, m, "barn0"); got != c.want {
			t.Errorf("%s: argvHolds(%q) = %v, want %v", c.name, c.args, got, c.want)
		}
	}
	if !argvHolds([]string{"-netdev", "bridge,id=p,br=b,,r", "-device", "virtio-net-pci,netdev=p,mac=" + m}, m, "b,r") {
		t.Error("a bridge named b,r (written br=b,,r) does not hold the MAC on b,r")
	}
}

// TestLockAttach: while one Barn holds a bridge's attach lock, another
// cannot take it (it waits, here ending at once with its context); once
// released, the next one takes it on its first try.
func TestLockAttach(t *testing.T) {
	old := AttachLockDir
	AttachLockDir = t.TempDir()
	defer func() { AttachLockDir = old }()
	release, err := LockAttach(context.Background(), "barn0")
	if err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := LockAttach(done, "barn0"); !errors.Is(err, context.Canceled) {
		t.Fatalf("second lock while held: %v, want it to wait (context canceled)", err)
	}
	other, err := LockAttach(done, "barn1") // another bridge: another lock
	if err != nil {
		t.Fatalf("another bridge's lock: %v", err)
	}
	other()
	release()
	again, err := LockAttach(done, "barn0")
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again()
	if _, err := LockAttach(done, "../etc"); err == nil {
		t.Error("a bridge name with a slash named a lock file")
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// TestLockAttachForeignFiles: a lock file another user created with a
// restrictive mode is opened without O_CREAT (which fs.protected_regular
// and the mode would refuse); a FIFO, a directory or a symlink planted at
// the path is an error naming it, at once.
func TestLockAttachForeignFiles(t *testing.T) {
	old := AttachLockDir
	AttachLockDir = t.TempDir()
	defer func() { AttachLockDir = old }()
	path := filepath.Join(AttachLockDir, "barn-attach-barn0.lock")
	if err := os.WriteFile(path, nil, 0o400); err != nil {
		t.Fatal(err)
	}
	release, err := LockAttach(context.Background(), "barn0")
	if err != nil {
		t.Fatalf("an existing read-only lock file: %v", err)
	}
	release()
	for name, plant := range map[string]func(string) error{
		"fifo":    func(p string) error { return syscall.Mkfifo(p, 0o644) },
		"dir":     func(p string) error { return os.Mkdir(p, 0o755) },
		"symlink": func(p string) error { return os.Symlink("/etc/passwd", p) },
	} {
		bridge := "br-" + name
		p := filepath.Join(AttachLockDir, "barn-attach-"+bridge+".lock")
		if err := plant(p); err != nil {
			t.Fatal(err)
		}
		if _, err := LockAttach(context.Background(), bridge); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s at the lock path: %v, want an error naming %s", name, err, p)
		}
	}
}
