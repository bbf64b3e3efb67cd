package doctor

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/hostnet"
	"barn.dev/lib/qemu"
)

// fakeHost is a scripted host: programs on PATH, their outputs, KVM and
// the network.
type fakeHost struct {
	env      map[string]string
	missing  map[string]bool   // programs not on PATH
	out      map[string]string // "prog arg..." → stdout
	kvmErr   error
	kvmSmoke qemu.Smoke
	net      hostnet.Report
	netErr   error
	firmware []qemu.Firmware
	// foreignSmoke, when set, is every foreign smoke start's outcome.
	foreignSmoke *qemu.Smoke
}

func healthy(t *testing.T) *fakeHost {
	dir := t.TempDir()
	code, vars := filepath.Join(dir, "CODE.fd"), filepath.Join(dir, "VARS.fd")
	for _, f := range []string{code, vars} {
		if err := os.WriteFile(f, []byte("fw"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	q := "/usr/bin/qemu-system-x86_64"
	return &fakeHost{
		env:     map[string]string{"BARN_HOME": filepath.Join(dir, ".barn"), "BARN_NET_HELPER": "/usr/lib/qemu/qemu-bridge-helper"},
		missing: map[string]bool{},
		out: map[string]string{
			q + " --version":                         "QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)\n",
			q + " -accel help":                       "Accelerators supported in QEMU binary:\ntcg\nkvm\n",
			q + " -machine help":                     "Supported machines are:\nq35                  Standard PC (Q35 + ICH9, 2009) (alias of pc-q35-7.2)\n",
			q + " -cpu help":                         "Available CPUs:\nx86 host                  processor with all supported host features \nx86 max                   Enables all features\n",
			q + " -device help":                      `name "scsi-cd", bus SCSI` + "\n" + `name "virtio-blk-pci", bus PCI` + "\n" + `name "virtio-scsi-pci", bus PCI` + "\n" + `name "virtio-net-pci", bus PCI` + "\n" + `name "virtio-9p-pci", bus PCI` + "\n",
			q + " -netdev help":                      "Available netdev backend types:\nsocket\nuser\nbridge\n",
			"/usr/bin/qemu-img --version":            "qemu-img version 7.2.22\n",
			"/usr/bin/qemu-system-aarch64 --version": "QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)\n",
			"/usr/bin/ssh -V":                        "",
		},
		kvmSmoke: qemu.Smoke{OK: true, Evidence: "stayed up"},
		net:      hostnet.Report{Usable: true, CIDR: "10.10.10.0/24", Bridge: "barn0", HostAddress: "10.10.10.1", Helper: "/usr/lib/qemu/qemu-bridge-helper"},
		firmware: []qemu.Firmware{{Code: code, Vars: vars}},
	}
}

func (h *fakeHost) probe() *Probe {
	return &Probe{
		Getenv: func(k string) string { return h.env[k] },
		LookPath: func(name string) (string, error) {
			if h.missing[name] {
				return "", exec.ErrNotFound
			}
			return "/usr/bin/" + name, nil
		},
		Exec: func(_ context.Context, name string, args ...string) ([]byte, []byte, error) {
			key := strings.Join(append([]string{name}, args...), " ")
			if key == "/usr/bin/ssh -V" {
				return nil, []byte("OpenSSH_9.2p1 Debian-2+deb12u10, OpenSSL 3.0.19\n"), nil
			}
			out, ok := h.out[key]
			if !ok {
				return nil, []byte("unknown option"), errors.New("exit status 1")
			}
			return []byte(out), nil, nil
		},
		Smoke: func(_ context.Context, bin, accel string) qemu.Smoke {
			if accel == qemu.AccelKVM {
				return h.kvmSmoke
			}
			return qemu.Smoke{OK: true, Evidence: bin + " -accel tcg stayed up"}
		},
		ForeignSmoke: func(_ context.Context, bin string, t qemu.Target) qemu.Smoke {
			if h.foreignSmoke != nil {
				return *h.foreignSmoke
			}
			return qemu.Smoke{OK: true, Evidence: bin + " -machine " + t.Machine + " answered QMP query-status"}
		},
		ForeignFirmware: map[string][]qemu.Firmware{"arm64": h.firmware},
		OpenKVM:         func() error { return h.kvmErr },
		Network:         func(context.Context) (hostnet.Report, error) { return h.net, h.netErr },
		Firmware:        h.firmware,
		GOOS:            "linux", GOARCH: "amd64",
	}
}

func statuses(r *Report) string {
	var b strings.Builder
	for _, c := range r.Checks {
		b.WriteString(c.Name + "=" + c.Status + " ")
	}
	return strings.TrimSpace(b.String())
}

func TestHealthyHostWithKVM(t *testing.T) {
	r := healthy(t).probe().Run(context.Background())
	want := "host=ok qemu=ok qemu-version=ok accelerator=ok kvm=ok kvm-real-smoke=ok machine=ok cpu=ok devices=ok netdev=ok " +
		"bridge-helper=ok qemu-img=ok firmware=ok foreign-archs=ok ssh=ok ssh-keygen=ok network=ok state=ok"
	if got := statuses(r); got != want {
		t.Fatalf("checks\n got %s\nwant %s", got, want)
	}
	if !r.Usable || r.Accelerator != "kvm" || r.Err() != nil {
		t.Fatalf("usable=%v accel=%q err=%v", r.Usable, r.Accelerator, r.Err())
	}
	for _, c := range r.Checks {
		if c.Evidence == "" || c.Fix != "" || c.Class == "" {
			t.Errorf("check %+v: an ok check has evidence, a class and no fix", c)
		}
	}
}

// TestBrokenKVM: a /dev/kvm that opens but cannot run a vCPU is an error
// while KVM is required (exit 3, fix: BARN_ACCEL=tcg) and only a warning
// once TCG is explicitly chosen, whose own smoke start then decides.
func TestBrokenKVM(t *testing.T) {
	h := healthy(t)
	h.kvmSmoke = qemu.Smoke{Evidence: "qemu-system-x86_64 -accel kvm exited after 12ms: failed to set MSR 0x10a"}
	r := h.probe().Run(context.Background())
	c := find(t, r, "kvm-real-smoke")
	if c.Status != Error || !strings.Contains(c.Evidence, "failed to set MSR") || !strings.Contains(c.Fix, "BARN_ACCEL=tcg") {
		t.Fatalf("kvm-real-smoke %+v", c)
	}
	e := exitcode.As(r.Err())
	if r.Usable || r.Accelerator != "" || e == nil || e.Class != exitcode.Capability || e.Reason != "capability_missing" ||
		!strings.Contains(e.Message, "kvm-real-smoke") || !strings.Contains(e.Next, "BARN_ACCEL=tcg") {
		t.Fatalf("usable=%v accel=%q err=%#v", r.Usable, r.Accelerator, e)
	}

	h.env["BARN_ACCEL"] = "tcg"
	r = h.probe().Run(context.Background())
	if c := find(t, r, "kvm-real-smoke"); c.Status != Warn || c.Fix != "" {
		t.Fatalf("with BARN_ACCEL=tcg: kvm-real-smoke %+v", c)
	}
	if c := find(t, r, "tcg-real-smoke"); c.Status != OK {
		t.Fatalf("tcg-real-smoke %+v", c)
	}
	if !r.Usable || r.Accelerator != "tcg" || r.Err() != nil {
		t.Fatalf("usable=%v accel=%q err=%v", r.Usable, r.Accelerator, r.Err())
	}
}

func TestNoKVMDevice(t *testing.T) {
	h := healthy(t)
	h.kvmErr = &fs.PathError{Op: "open", Path: "/dev/kvm", Err: fs.ErrNotExist}
	r := h.probe().Run(context.Background())
	c := find(t, r, "kvm")
	if c.Status != Error || !strings.Contains(c.Fix, "kvm_intel") {
		t.Fatalf("kvm %+v", c)
	}
	for _, c := range r.Checks {
		if c.Name == "kvm-real-smoke" {
			t.Fatal("no smoke start without a /dev/kvm")
		}
	}
}

// TestMissingTools: each missing piece is its own error with its own fix,
// and all of them make the report unusable.
func TestMissingTools(t *testing.T) {
	h := healthy(t)
	h.missing["qemu-img"], h.missing["ssh"], h.missing["ssh-keygen"] = true, true, true
	h.firmware = []qemu.Firmware{{Code: "/nonexistent/CODE.fd", Vars: "/nonexistent/VARS.fd"}}
	r := h.probe().Run(context.Background())
	for name, fix := range map[string]string{"qemu-img": "sudo apt-get install qemu-utils", "ssh": "sudo apt-get install openssh-client",
		"firmware": "sudo apt-get install ovmf"} {
		if c := find(t, r, name); c.Status != Error || c.Fix != fix {
			t.Errorf("%s %+v", name, c)
		}
	}
	if c := find(t, r, "ssh-keygen"); c.Status != Warn {
		t.Errorf("ssh-keygen %+v: Barn does not need it, a warning only", c)
	}
	if e := exitcode.As(r.Err()); e == nil || e.Message != "this host cannot run Barn nodes yet: qemu-img, firmware, ssh" {
		t.Fatalf("err %v", r.Err())
	}

	h = healthy(t)
	h.missing["qemu-system-x86_64"] = true
	r = h.probe().Run(context.Background())
	if c := find(t, r, "qemu"); c.Status != Error || c.Fix != "sudo apt-get install qemu-system-x86" {
		t.Fatalf("qemu %+v", c)
	}
	for _, c := range r.Checks {
		if c.Name == "machine" || c.Name == "kvm" {
			t.Fatalf("%s checked without a QEMU", c.Name)
		}
	}
}

// TestQEMUFeatures: a QEMU without 9p is a warning (only vm_shares need
// it); without q35, the bridge netdev or the host CPU model an error; an
// old QEMU a warning.
func TestQEMUFeatures(t *testing.T) {
	q := "/usr/bin/qemu-system-x86_64"
	h := healthy(t)
	h.out[q+" -device help"] = strings.ReplaceAll(h.out[q+" -device help"], `name "virtio-9p-pci", bus PCI`, "")
	h.out[q+" -netdev help"] = "Available netdev backend types:\nuser\n"
	h.out[q+" -machine help"] = "Supported machines are:\npc  Standard PC\n"
	h.out[q+" --version"] = "QEMU emulator version 6.2.0\n"
	r := h.probe().Run(context.Background())
	want := map[string]string{"devices": Warn, "netdev": Error, "machine": Error, "qemu-version": Warn}
	for name, status := range want {
		if c := find(t, r, name); c.Status != status {
			t.Errorf("%s %+v, want %s", name, c, status)
		}
	}
	if c := find(t, r, "devices"); !strings.Contains(c.Evidence, "no virtio-9p-pci") {
		t.Errorf("devices %+v", c)
	}
}

// TestNetworkErrorsAloneKeepExitZero: as in Barn 0.9, a host network that
// was never installed is reported as an error of class network, with
// barn-net's fix, but it does not make the capability verdict fail.
func TestNetworkErrorsAloneKeepExitZero(t *testing.T) {
	h := healthy(t)
	h.net = hostnet.Report{CIDR: "10.10.10.0/24", Bridge: "barn0", Findings: []hostnet.Finding{
		{Code: hostnet.FindBridgeAbsent, Severity: hostnet.SevError, Message: "bridge barn0 does not exist", Fix: "barn-net install"}}}
	h.netErr = exitcode.New(exitcode.Capability, "not usable").WithReason("network_unusable")
	r := h.probe().Run(context.Background())
	c := find(t, r, "network")
	if c.Status != Error || c.Class != ClassNetwork || c.Fix != "barn-net install" || !strings.Contains(c.Evidence, "barn0 does not exist") {
		t.Fatalf("network %+v", c)
	}
	if !r.Usable || r.Err() != nil {
		t.Fatalf("usable=%v err=%v", r.Usable, r.Err())
	}
	var b bytes.Buffer
	if err := r.RenderText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "fix: barn-net install") || !strings.Contains(b.String(), "linux/amd64: usable") ||
		!strings.Contains(b.String(), "the private network is not ready") {
		t.Fatalf("text:\n%s", b.String())
	}
}

// TestHostArch: an arm64 host is a warning (built, not proven on one),
// any other architecture an error.
func TestHostArch(t *testing.T) {
	p := healthy(t).probe()
	p.GOARCH = "arm64"
	r := p.Run(context.Background())
	if c := find(t, r, "host"); c.Status != Warn || !strings.Contains(c.Evidence, "no arm64 host has run them") {
		t.Fatalf("arm64 host %+v", c)
	}
	p.GOARCH = "riscv64"
	r = p.Run(context.Background())
	if c := find(t, r, "host"); c.Status != Error || r.Usable {
		t.Fatalf("riscv64 host %+v usable=%v", c, r.Usable)
	}
}

// TestQEMUFixNamesTheHostsPackage: a missing emulator's fix installs the
// package of the host's own architecture.
func TestQEMUFixNamesTheHostsPackage(t *testing.T) {
	for arch, pkg := range map[string]string{"amd64": "qemu-system-x86", "arm64": "qemu-system-arm"} {
		p := healthy(t).probe()
		p.GOARCH = arch
		p.LookPath = func(string) (string, error) { return "", exec.ErrNotFound }
		r := p.Run(context.Background())
		if c := find(t, r, "qemu"); c.Status != Error || c.Fix != "sudo apt-get install "+pkg {
			t.Fatalf("%s host: %+v", arch, c)
		}
	}
}

func TestOlder(t *testing.T) {
	for _, c := range []struct {
		v    string
		want bool
	}{{"7.2.0", false}, {"7.2.22", false}, {"8.0.0", false}, {"7.1.5", true}, {"6.2.0", true}, {"7.2", false}, {"10.0.0", false}} {
		if got := older(c.v, MinQEMU); got != c.want {
			t.Errorf("older(%q) = %v", c.v, got)
		}
	}
}

func find(t *testing.T, r *Report, name string) Check {
	t.Helper()
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %s", name, statuses(r))
	return Check{}
}

// TestRealHost runs the doctor against this machine's real tools with TCG
// chosen explicitly: every capability check the project's prerequisites
// (scripts/install-deps.sh) provide must be ok, proven by real queries and
// a real TCG smoke start; KVM is whatever this host has.
func TestRealHost(t *testing.T) {
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("qemu-system-x86_64 not installed: ", err)
	}
	if _, err := qemu.FindFirmware(qemu.FirmwarePairs); err != nil {
		t.Skip("no OVMF (scripts/install-deps.sh installs it): ", err)
	}
	env := map[string]string{"BARN_ACCEL": "tcg", "BARN_HOME": filepath.Join(t.TempDir(), ".barn"), "HOME": os.Getenv("HOME")}
	r := (&Probe{Getenv: func(k string) string { return env[k] }}).Run(context.Background())
	for _, c := range r.Checks {
		t.Logf("%-6s %-15s %s", c.Status, c.Name, c.Evidence)
		switch c.Name {
		case "kvm", "kvm-real-smoke", "network":
			continue // the host's KVM and network are what they are
		}
		if c.Status != OK {
			t.Errorf("check %s: %s: %s (fix: %s)", c.Name, c.Status, c.Evidence, c.Fix)
		}
	}
	if !r.Usable || r.Accelerator != "tcg" {
		t.Fatalf("usable=%v accelerator=%q", r.Usable, r.Accelerator)
	}
	if c := find(t, r, "tcg-real-smoke"); !strings.Contains(c.Evidence, "answered QMP query-status") {
		t.Fatalf("tcg-real-smoke %+v", c)
	}
}

// TestForeignArchs: the foreign architectures are listed when a paused
// smoke start of their emulator answers; a missing emulator or a failed
// smoke start is a warning naming the package, never a capability error.
func TestForeignArchs(t *testing.T) {
	h := healthy(t)
	r := h.probe().Run(context.Background())
	if len(r.ForeignArchs) != 1 || r.ForeignArchs[0] != "arm64" {
		t.Fatalf("foreign archs %v", r.ForeignArchs)
	}
	c := check(t, r, "foreign-archs")
	if c.Status != OK || !strings.Contains(c.Evidence, "qemu-system-aarch64 7.2.22, machine virt, cpu max, TCG thread=multi") {
		t.Fatalf("%+v", c)
	}
	h.missing["qemu-system-aarch64"] = true
	r = h.probe().Run(context.Background())
	c = check(t, r, "foreign-archs")
	if c.Status != Warn || !strings.Contains(c.Fix, "qemu-system-arm") || len(r.ForeignArchs) != 0 || !r.Usable {
		t.Fatalf("missing emulator: %+v archs %v usable %v", c, r.ForeignArchs, r.Usable)
	}
	delete(h.missing, "qemu-system-aarch64")
	h.foreignSmoke = &qemu.Smoke{Evidence: "qemu-system-aarch64 exited after 3ms (exit status 1): unsupported machine type"}
	r = h.probe().Run(context.Background())
	if c = check(t, r, "foreign-archs"); c.Status != Warn || !strings.Contains(c.Evidence, "unsupported machine type") {
		t.Fatalf("failed smoke: %+v", c)
	}
}

func check(t *testing.T, r *Report, name string) Check {
	t.Helper()
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %s in %s", name, statuses(r))
	return Check{}
}
