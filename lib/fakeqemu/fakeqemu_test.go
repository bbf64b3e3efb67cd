package fakeqemu

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if Invoked() {
		os.Exit(Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// TestMonitorsServeOneClientAtATime: like QEMU, each monitor serves one
// client and queues the next until it disconnects, while another monitor
// of the same process answers independently; a clean quit removes every
// socket and the pidfile.
func TestMonitorsServeOneClientAtATime(t *testing.T) {
	dir := t.TempDir()
	bin, err := Install(dir)
	if err != nil {
		t.Fatal(err)
	}
	op, own, pidfile := filepath.Join(dir, "qmp.sock"), filepath.Join(dir, "barn.sock"), filepath.Join(dir, "qemu.pid")
	cmd := exec.Command(bin, "-name", "n1", "-uuid", "6f1c2a52-8d0e-4c43-9a55-2b7f7f1d0c11", "-daemonize",
		"-qmp", "unix:"+op+",server=on,wait=off", "-chardev", "socket,id=barn,path="+own+",server=on,wait=off",
		"-mon", "chardev=barn,mode=control", "-pidfile", pidfile)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fake: %v: %s", err, out)
	}
	greeted := func(c net.Conn, within time.Duration) bool {
		c.SetReadDeadline(time.Now().Add(within))
		_, err := bufio.NewReader(c).ReadString('\n')
		return err == nil
	}
	dial := func(path string) net.Conn {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	holder := dial(op)
	if !greeted(holder, 5*time.Second) {
		t.Fatal("first client not greeted")
	}
	queued := dial(op)
	if greeted(queued, 300*time.Millisecond) {
		t.Fatal("a second client of a held monitor was greeted")
	}
	ownConn := dial(own)
	if !greeted(ownConn, 5*time.Second) {
		t.Fatal("the other monitor does not answer while the first is held")
	}
	holder.Close()
	if !greeted(queued, 5*time.Second) {
		t.Fatal("the queued client was not greeted after the holder left")
	}
	for _, line := range []string{`{"execute":"qmp_capabilities"}`, `{"execute":"quit"}`} {
		if _, err := ownConn.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{op, own, pidfile} {
		for i := 0; i < 250; i++ {
			if _, err := os.Lstat(p); os.IsNotExist(err) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s remains after quit", p)
		}
	}
}

func TestParseGeneratedSubset(t *testing.T) {
	args := []string{
		"-name", "n1", "-uuid", "6f1c2a52-8d0e-4c43-9a55-2b7f7f1d0c11", "-machine", "q35", "-accel", "tcg,thread=multi",
		"-cpu", "max", "-smp", "2", "-m", "1024", "-nodefaults", "-no-user-config", "-display", "none",
		"-qmp", "unix:/r/a,,b/qmp.sock,server=on,wait=off", "-pidfile", "/r/qemu.pid",
		"-chardev", "file,id=serial0,path=/n/a,,b/serial.log", "-serial", "chardev:serial0",
		"-chardev", "socket,id=barn,path=/r/a,,b/barn.sock,server=on,wait=off", "-mon", "chardev=barn,mode=control",
		"-daemonize", "-S",
		"-blockdev", `{"driver":"file","filename":"/n/root.qcow2","node-name":"root-file"}`,
		"-blockdev", `{"driver":"qcow2","file":"root-file","node-name":"root"}`,
		"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=/fw/code.fd",
		"-fsdev", "local,id=share0,path=/proc/self/fd/3,security_model=mapped-xattr",
	}
	env := map[string]string{"FAKEQEMU_MODE": "ignore-powerdown, wrong-uuid", "FAKEQEMU_EXIT_DELAY": "250ms"}
	cfg, err := parse(args, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.name != "n1" || !reflect.DeepEqual(cfg.monitors, []string{"/r/a,b/qmp.sock", "/r/a,b/barn.sock"}) || cfg.pidfile != "/r/qemu.pid" || cfg.serial != "/n/a,b/serial.log" ||
		!cfg.daemonize || !cfg.paused || cfg.memMiB != 1024 || cfg.exitDelay != 250*time.Millisecond {
		t.Fatalf("cfg %+v", cfg)
	}
	if !reflect.DeepEqual(cfg.files, []string{"/n/root.qcow2", "/fw/code.fd"}) || !reflect.DeepEqual(cfg.shareFDs, []int{3}) {
		t.Fatalf("files %q fds %v", cfg.files, cfg.shareFDs)
	}
	if !cfg.modes[IgnorePowerdown] || !cfg.modes[WrongUUID] || cfg.modes[HangQMP] {
		t.Fatalf("modes %v", cfg.modes)
	}
}

// The management port forward is served only when FAKEQEMU_HOSTFWD names
// where to relay it; the host side is the hostfwd option's address.
func TestParseHostFwd(t *testing.T) {
	args := []string{"-name", "n1", "-qmp", "unix:/r/qmp.sock,server=on,wait=off",
		"-netdev", "user,id=mgmt,hostfwd=tcp:127.0.0.1:2222-:22"}
	for env, want := range map[string][2]string{"": {}, "127.0.0.1:40000": {"127.0.0.1:2222", "127.0.0.1:40000"}} {
		cfg, err := parse(args, func(k string) string {
			if k == HostFwdEnv {
				return env
			}
			return ""
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := [2]string{cfg.hostfwd, cfg.fwdTarget}; got != want {
			t.Errorf("%s=%q: forward %q, want %q", HostFwdEnv, env, got, want)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, args := range [][]string{
		{"-frobnicate", "-qmp", "unix:/q"},
		{"-qmp"},
		{"-qmp", "tcp:localhost:4444"},
		{"-m", "lots", "-qmp", "unix:/q"},
		{"-name", "n1"},
		{"-chardev", "socket,id=m,path=/q,server=on", "-mon", "chardev=other,mode=control"},
		{"-chardev", "socket,id=m,path=/q,server=on", "-mon", "chardev=m,mode=readline"},
	} {
		if _, err := parse(args, func(string) string { return "" }); err == nil {
			t.Errorf("parse(%q) accepted", args)
		}
	}
}

func TestMainExitStatus(t *testing.T) {
	if got := Main([]string{"-frobnicate"}); got != 1 {
		t.Errorf("unknown flag: exit %d, want 1", got)
	}
	if got := Main([]string{"-qmp", "unix:/nonexistent/q", "-blockdev", `{"driver":"file","filename":"/nonexistent/root.qcow2"}`}); got != 1 {
		t.Errorf("missing disk: exit %d, want 1", got)
	}
}

// TestSmokeStart: the fake stays up for a smoke start, as QEMU does, and
// aborts a KVM one in kvm-broken mode.
func TestSmokeStart(t *testing.T) {
	args := []string{"-accel", "kvm", "-machine", "q35", "-cpu", "host", "-display", "none", "-nodefaults", "-no-user-config", "-S"}
	cfg, err := parse(args, func(string) string { return "" })
	if err != nil || !cfg.smoke || cfg.accel != "kvm" {
		t.Fatalf("cfg %+v err %v", cfg, err)
	}
	cfg.modes[KVMBroken] = true
	if got := smoke(cfg); got != 134 {
		t.Fatalf("kvm-broken smoke exit %d, want 134", got)
	}
}

// TestHelpQueries: the capability queries list what Barn's argv uses,
// and the modes leave one entry out.
func TestHelpQueries(t *testing.T) {
	var b strings.Builder
	if !helpQuery([]string{"-device", "help"}, map[string]bool{}, &b) || !strings.Contains(b.String(), `name "virtio-9p-pci"`) {
		t.Fatalf("-device help: %q", b.String())
	}
	b.Reset()
	helpQuery([]string{"-device", "help"}, map[string]bool{No9P: true}, &b)
	if strings.Contains(b.String(), "virtio-9p-pci") || !strings.Contains(b.String(), "virtio-blk-pci") {
		t.Fatalf("-device help with no-9p: %q", b.String())
	}
	if helpQuery([]string{"-device", "virtio-blk-pci,help"}, map[string]bool{}, &b) {
		t.Fatal("a device property query is not a help listing")
	}
}
