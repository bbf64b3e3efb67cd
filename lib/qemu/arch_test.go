package qemu

import (
	"errors"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
)

// TestForeignPolicy: the accelerator, thread mode, machine and CPU of a
// foreign guest are policy, one row per host/guest pair.
func TestForeignPolicy(t *testing.T) {
	for _, tc := range []struct{ guest, host, bin, machine, thread string }{
		{"arm64", "amd64", "/usr/bin/qemu-system-aarch64", "virt", TCGMulti},
		{"amd64", "arm64", "/usr/bin/qemu-system-x86_64", "q35", TCGSingle},
	} {
		p, err := ForeignProfile(kvmProfile(), tc.guest, tc.host, foreignLookPath)
		if err != nil {
			t.Fatal(err)
		}
		if p.Arch != tc.guest || p.Binary != tc.bin || p.Machine != tc.machine || p.Accel != AccelTCG || p.TCGThread != tc.thread ||
			p.CPU != ForeignCPU || p.Bridge != "barn0" || p.PrivateNet != PrivateNetBridge {
			t.Errorf("%s on %s: %+v", tc.guest, tc.host, p)
		}
	}
	if TCGThreads("arm64", "arm64") != TCGMulti || TCGThreads("amd64", "amd64") != TCGMulti {
		t.Error("native TCG is multi-threaded")
	}
}

// TestForeignEmulatorMissingNamesPackage: a missing foreign emulator is a
// capability error naming the package to install.
func TestForeignEmulatorMissingNamesPackage(t *testing.T) {
	missing := func(string) (string, error) { return "", errors.New("not found") }
	_, err := ForeignProfile(kvmProfile(), "arm64", "amd64", missing)
	e := exitcode.As(err)
	if e == nil || e.Class != exitcode.Capability || e.Reason != "qemu_missing" || !strings.Contains(e.Next, "qemu-system-arm") ||
		!strings.Contains(e.Next, "qemu-efi-aarch64") || !strings.Contains(err.Error(), "qemu-system-aarch64") {
		t.Fatalf("got %v (%+v)", err, e)
	}
	_, err = ForeignProfile(kvmProfile(), "riscv64", "amd64", foreignLookPath)
	if e := exitcode.As(err); e == nil || e.Reason != "guest_arch_unsupported" {
		t.Fatalf("riscv64: %v", err)
	}
}

// TestInvocationRefusesMismatchedArch: an image of another architecture
// than the profile's, or a BIOS image for arm64, is not launched.
func TestInvocationRefusesMismatchedArch(t *testing.T) {
	in := baseInput() // amd64, bios
	if _, err := Invocation(in, foreignProfile("arm64", "amd64")); err == nil || !strings.Contains(err.Error(), "image.arch") {
		t.Errorf("amd64 image under the arm64 profile: %v", err)
	}
	in.Image.Arch = "arm64"
	if _, err := Invocation(in, foreignProfile("arm64", "amd64")); err == nil || !strings.Contains(err.Error(), "image.boot") {
		t.Errorf("arm64 bios image: %v", err)
	}
}
