package qemu

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"barn.dev/lib/testexec"
)

// TestSmokeStart: a QEMU that aborts at once (as on a host whose /dev/kvm
// cannot set up a vCPU) is not usable and its message is the evidence; one
// that stays up without ever answering QMP is not usable either (the
// start's deadline ends it); a missing binary is named. The usable case,
// a real QMP answer, is TestSmokeStartRealQEMU's.
func TestSmokeStart(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := testexec.WriteScript(p, []byte("#!/bin/sh\n"+body+"\n")); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ctx := context.Background()
	aborts := write("aborts", `echo "qemu-system-x86_64: error: failed to set MSR 0x10a" >&2; exit 134`)
	mute := write("mute", `exec sleep 60`)
	s := SmokeStart(ctx, aborts, AccelKVM)
	if s.OK || !strings.Contains(s.Evidence, "failed to set MSR 0x10a") || !strings.Contains(s.Evidence, "-accel kvm -cpu host") {
		t.Errorf("a QEMU that aborts: %+v", s)
	}
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if s := SmokeStart(short, mute, AccelTCG); s.OK || !strings.Contains(s.Evidence, "killed") {
		t.Errorf("a QEMU that never answers QMP: %+v", s)
	}
	if s := SmokeStart(ctx, filepath.Join(dir, "missing"), AccelKVM); s.OK || !strings.Contains(s.Evidence, "no such file") {
		t.Errorf("a missing binary: %+v", s)
	}
}

// TestSmokeStartRealQEMU smoke-starts the installed qemu-system-x86_64
// with TCG, which works on every host, and with KVM, whose answer must
// agree with the per-process probe DetectProfile uses.
func TestSmokeStartRealQEMU(t *testing.T) {
	bin, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Skip("qemu-system-x86_64 not installed:", err)
	}
	if s := SmokeStart(context.Background(), bin, AccelTCG); !s.OK || !strings.Contains(s.Evidence, "answered QMP query-status") {
		t.Fatalf("TCG smoke start of %s failed: %s", bin, s.Evidence)
	}
	probe := probeKVM()
	t.Logf("KVM on this host: usable=%v: %s", probe.OK, probe.Evidence)
	if OpenKVM(KVMDevice) == nil {
		kvm := SmokeStart(context.Background(), bin, AccelKVM)
		if kvm.OK != probe.OK {
			t.Fatalf("KVM smoke %v (%s) disagrees with the probe %v (%s)", kvm.OK, kvm.Evidence, probe.OK, probe.Evidence)
		}
	} else if probe.OK {
		t.Fatalf("/dev/kvm does not open but the probe says usable: %s", probe.Evidence)
	}
}

// TestSmokeForeignRealQEMU smoke-starts the installed foreign emulators as
// Barn runs them (arm64: qemu-system-aarch64 -machine virt -cpu max under
// multi-threaded TCG). A missing emulator is a skip that names the
// package; install-deps.sh installs qemu-system-arm for the suites.
func TestSmokeForeignRealQEMU(t *testing.T) {
	for _, arch := range TargetArchs() {
		if arch == HostArch() {
			continue
		}
		tg := Targets[arch]
		bin, err := exec.LookPath(tg.Binary)
		if err != nil {
			t.Skipf("%s not installed (package %s): %v", tg.Binary, tg.Package, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		s := SmokeForeign(ctx, bin, tg)
		cancel()
		if !s.OK || !strings.Contains(s.Evidence, "-machine "+tg.Machine) || !strings.Contains(s.Evidence, "answered QMP query-status") {
			t.Fatalf("%s: %s", arch, s.Evidence)
		}
		bogus := SmokeForeign(context.Background(), bin, Target{Arch: arch, Machine: "no-such-machine"})
		if bogus.OK || !strings.Contains(bogus.Evidence, "exited") {
			t.Fatalf("a machine %s lacks smoke-starts: %s", tg.Binary, bogus.Evidence)
		}
	}
}
