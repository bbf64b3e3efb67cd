package fakeqemu

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseGeneratedSubset(t *testing.T) {
	args := []string{
		"-name", "n1", "-uuid", "6f1c2a52-8d0e-4c43-9a55-2b7f7f1d0c11", "-machine", "q35", "-accel", "tcg,thread=multi",
		"-cpu", "max", "-smp", "2", "-m", "1024", "-nodefaults", "-no-user-config", "-display", "none",
		"-qmp", "unix:/r/a,,b/qmp.sock,server=on,wait=off", "-pidfile", "/r/qemu.pid",
		"-chardev", "file,id=serial0,path=/n/a,,b/serial.log", "-serial", "chardev:serial0",
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
	if cfg.name != "n1" || cfg.qmp != "/r/a,b/qmp.sock" || cfg.pidfile != "/r/qemu.pid" || cfg.serial != "/n/a,b/serial.log" ||
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

func TestParseRejects(t *testing.T) {
	for _, args := range [][]string{
		{"-frobnicate", "-qmp", "unix:/q"},
		{"-qmp"},
		{"-qmp", "tcp:localhost:4444"},
		{"-m", "lots", "-qmp", "unix:/q"},
		{"-name", "n1"},
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

func TestSplitOpts(t *testing.T) {
	got := splitOpts("unix:/a,,b,server=on,,x,wait=off")
	want := []string{"unix:/a,b", "server=on,x", "wait=off"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("%q", got)
	}
}
