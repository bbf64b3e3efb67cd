package qemu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
)

// TestFindFirmware: the first pair whose code and vars are both non-empty
// regular files wins; none is capability/firmware_missing naming both
// files of each pair it looked at.
func TestFindFirmware(t *testing.T) {
	dir := t.TempDir()
	touch := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	code, vars := touch("CODE.fd"), touch("VARS.fd")
	onlyCode := Firmware{Code: code, Vars: filepath.Join(dir, "missing-VARS.fd")}
	got, err := FindFirmware([]Firmware{onlyCode, {Code: code, Vars: vars}})
	if err != nil || got != (Firmware{Code: code, Vars: vars}) {
		t.Fatalf("got %+v %v", got, err)
	}
	_, err = FindFirmware([]Firmware{onlyCode, {Code: dir, Vars: vars}}) // a directory is not firmware
	e := exitcode.As(err)
	if e == nil || e.Class != exitcode.Capability || e.Reason != "firmware_missing" || e.Next != "sudo apt-get install ovmf" ||
		!strings.Contains(e.Message, code+" with "+onlyCode.Vars) {
		t.Fatalf("err = %#v", err)
	}
	empty := filepath.Join(dir, "EMPTY.fd")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := FindFirmware([]Firmware{{Code: empty, Vars: vars}}); exitcode.As(err) == nil || exitcode.As(err).Reason != "firmware_missing" {
		t.Fatalf("an empty code file is firmware: %v", err)
	}
}

// TestFindFirmwareOnThisHost finds the distro's OVMF, which
// scripts/install-deps.sh installs.
func TestFindFirmwareOnThisHost(t *testing.T) {
	fw, err := FindFirmware(FirmwarePairs)
	if err != nil {
		t.Skip("no OVMF installed (scripts/install-deps.sh installs ovmf): ", err)
	}
	if !strings.HasPrefix(fw.Code, "/usr/share/") || !strings.HasSuffix(fw.Vars, ".fd") {
		t.Fatalf("firmware %+v", fw)
	}
}

func TestCheckGuestArch(t *testing.T) {
	for _, arch := range []string{"amd64", "arm64"} {
		if err := CheckGuestArch(arch); err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
	}
	for _, arch := range []string{"riscv64", ""} {
		e := exitcode.As(CheckGuestArch(arch))
		if e == nil || e.Class != exitcode.Capability || e.Reason != "guest_arch_unsupported" || e.Next == "" {
			t.Fatalf("%q: %#v", arch, e)
		}
	}
}

func TestFindFirmwareOfNamesTargetPackage(t *testing.T) {
	_, err := FindFirmwareOf(Targets["arm64"], []Firmware{{Code: "/nonexistent/AAVMF_CODE.fd", Vars: "/nonexistent/AAVMF_VARS.fd"}})
	e := exitcode.As(err)
	if e == nil || e.Reason != "firmware_missing" || !strings.Contains(e.Next, "qemu-efi-aarch64") || !strings.Contains(e.Message, "arm64") {
		t.Fatalf("%#v", e)
	}
}
