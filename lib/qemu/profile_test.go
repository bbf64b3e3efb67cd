package qemu

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/testexec"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func found(name string) (string, error) { return "/usr/bin/" + name, nil }

func withKVM(t *testing.T, usable bool) {
	old := kvmUsable
	kvmUsable = func() Smoke { return Smoke{OK: usable, Evidence: "pinned by the test"} }
	t.Cleanup(func() { kvmUsable = old })
}

func TestDetectProfileNoKVMIsCapabilityError(t *testing.T) {
	withKVM(t, false)
	_, err := DetectProfile(env(nil), found)
	e := exitcode.As(err)
	if e == nil || e.Class != exitcode.Capability || e.Reason != "accelerator_unavailable" || !strings.Contains(e.Next, "BARN_ACCEL=tcg") {
		t.Fatalf("got %#v, want capability accelerator_unavailable with a BARN_ACCEL=tcg next", err)
	}
	_, err = DetectProfile(env(map[string]string{"BARN_ACCEL": "kvm"}), found)
	if exitcode.ClassOf(err) != exitcode.Capability {
		t.Fatalf("BARN_ACCEL=kvm without /dev/kvm: %v", err)
	}
}

func TestDetectProfileExplicitTCG(t *testing.T) {
	withKVM(t, false)
	p, err := DetectProfile(env(map[string]string{"BARN_ACCEL": "tcg", "BARN_NET_HELPER": "/h"}), found)
	if err != nil {
		t.Fatal(err)
	}
	want := Profile{Arch: "amd64", Binary: "/usr/bin/qemu-system-x86_64", Accel: "tcg", TCGThread: "multi", Machine: "q35", CPU: "max",
		Bridge: "barn0", BridgeHelper: "/h", PrivateNet: "bridge", Host: DetectHostSize()}
	if p != want {
		t.Fatalf("got %+v\nwant %+v", p, want)
	}
}

func TestDetectProfileKVM(t *testing.T) {
	withKVM(t, true)
	p, err := DetectProfile(env(map[string]string{"BARN_NET_HELPER": "/h", "BARN_BRIDGE": "br9"}), found)
	if err != nil {
		t.Fatal(err)
	}
	if p.Accel != "kvm" || p.CPU != "host" || p.Bridge != "br9" {
		t.Fatalf("got %+v", p)
	}
}

func TestDetectProfileOverrides(t *testing.T) {
	withKVM(t, false)
	p, err := DetectProfile(env(map[string]string{"BARN_ACCEL": "tcg", "BARN_QEMU": "/opt/fake/qemu", "BARN_PRIVATE_NET": "none"}),
		func(n string) (string, error) {
			if n != "/opt/fake/qemu" {
				t.Errorf("lookPath(%q)", n)
			}
			return n, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if p.Binary != "/opt/fake/qemu" || p.PrivateNet != PrivateNetNone || p.BridgeHelper != "" {
		t.Fatalf("got %+v", p)
	}
	_, err = DetectProfile(env(map[string]string{"BARN_ACCEL": "tcg", "BARN_QEMU": "qemu-nope"}),
		func(string) (string, error) { return "", exec.ErrNotFound })
	if e := exitcode.As(err); e == nil || e.Class != exitcode.Capability || e.Reason != "qemu_missing" {
		t.Fatalf("missing binary: %v", err)
	}
	_, err = DetectProfile(env(map[string]string{"BARN_ACCEL": "hvf"}), found)
	if exitcode.ClassOf(err) != exitcode.Usage {
		t.Fatalf("bad accel: %v", err)
	}
}

// TestResolveBinaryResolvesSymlinks: the binary recorded as argv[0] is
// the file the kernel shows as /proc/<pid>/exe, symlinks resolved, so a
// QEMU found through a symlinked directory or name is still recognised
// as the invocation's binary.
func TestResolveBinaryResolvesSymlinks(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real", "qemu-system-x86_64")
	if err := os.MkdirAll(filepath.Dir(real), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := testexec.WriteScript(real, []byte("#!/bin/sh\n")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "bin")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(dir, "qemu")); err != nil {
		t.Fatal(err)
	}
	want, _ := filepath.EvalSymlinks(real)
	for name, getenv := range map[string]func(string) string{
		"a name found in a symlinked directory": env(map[string]string{"PATH": filepath.Join(dir, "bin")}),
		"an absolute symlink":                   env(map[string]string{"BARN_QEMU": filepath.Join(dir, "qemu")}),
	} {
		lookPath := func(n string) (string, error) {
			if filepath.IsAbs(n) {
				return exec.LookPath(n)
			}
			return filepath.Join(getenv("PATH"), n), nil
		}
		if got, err := ResolveBinary(getenv, lookPath); err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", name, got, err, want)
		}
	}
}

func TestParseVersion(t *testing.T) {
	v, err := ParseVersion([]byte("QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)\nCopyright\n"))
	if err != nil || v != "7.2.22" {
		t.Fatalf("%q %v", v, err)
	}
	if _, err := ParseVersion([]byte("hello\n")); !errors.Is(err, ErrNoVersion) {
		t.Fatalf("%v", err)
	}
}

// TestProbeVersionRealQEMU runs the installed qemu-system-x86_64.
func TestProbeVersionRealQEMU(t *testing.T) {
	bin, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Skip("qemu-system-x86_64 not installed:", err)
	}
	v, err := ProbeVersion(context.Background(), bin)
	if err != nil || !strings.Contains(v, ".") {
		t.Fatalf("%q %v", v, err)
	}
}

// TestDetectProfileOfArm64Host: on an arm64 host the native guests are
// arm64 (qemu-system-aarch64, virt; KVM with CPU host, or TCG with CPU
// max when asked), and amd64 guests derive a foreign profile from it:
// q35, CPU max, single-threaded TCG by policy. Other hosts are refused.
func TestDetectProfileOfArm64Host(t *testing.T) {
	withKVM(t, true)
	p, err := DetectProfileOf("arm64", env(map[string]string{"BARN_NET_HELPER": "/h"}), found)
	if err != nil {
		t.Fatal(err)
	}
	if p.Arch != "arm64" || p.Binary != "/usr/bin/qemu-system-aarch64" || p.Machine != "virt" || p.Accel != AccelKVM || p.CPU != "host" {
		t.Fatalf("native arm64 under KVM: %+v", p)
	}
	tcg, err := DetectProfileOf("arm64", env(map[string]string{"BARN_ACCEL": "tcg", "BARN_NET_HELPER": "/h"}), found)
	if err != nil || tcg.Accel != AccelTCG || tcg.CPU != "max" || tcg.TCGThread != TCGMulti || tcg.Machine != "virt" {
		t.Fatalf("native arm64 under TCG: %+v %v", tcg, err)
	}
	x86, err := ForeignProfile(p, "amd64", "arm64", found)
	if err != nil || x86.Binary != "/usr/bin/qemu-system-x86_64" || x86.Machine != "q35" || x86.Accel != AccelTCG || x86.TCGThread != TCGSingle || x86.CPU != "max" || x86.BridgeHelper != "/h" {
		t.Fatalf("amd64 on arm64: %+v %v", x86, err)
	}
	missing := func(string) (string, error) { return "", errors.New("not found") }
	_, err = DetectProfileOf("arm64", env(map[string]string{"BARN_NET_HELPER": "/h"}), missing)
	if e := exitcode.As(err); e == nil || e.Reason != "qemu_missing" || !strings.Contains(e.Next, "qemu-system-arm ") {
		t.Fatalf("no qemu-system-aarch64 on an arm64 host: %#v", err)
	}
	_, err = DetectProfileOf("riscv64", env(nil), found)
	if e := exitcode.As(err); e == nil || e.Class != exitcode.Capability || e.Reason != "host_arch_unsupported" {
		t.Fatalf("riscv64 host: %#v", err)
	}
}
