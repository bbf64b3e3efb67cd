package inventory

import "testing"

// TestVMArchAliases: vm_arch is read with its aliases (x86_64/x64 → amd64,
// aarch64/a64 → arm64), as every other place that reads an architecture (spec.ParseArch, any case).
func TestVMArchAliases(t *testing.T) {
	for in, want := range map[string]string{
		"x86_64": "amd64", "x64": "amd64", "AARCH64": "arm64", "a64": "arm64",
		"arm64": "arm64", "amd64": "amd64", "native": "native", "AMD64": "amd64", "Native": "native",
	} {
		s, _, err := Resolve([]byte("all:\n  vars: {vm_arch: "+in+"}\n  hosts: {10.10.10.10: {}}\n"), "pigsty.yml")
		if err != nil {
			t.Errorf("vm_arch %s: %v", in, err)
			continue
		}
		if s.Deployment.Arch != want {
			t.Errorf("vm_arch %s: deployment.arch %q, want %q", in, s.Deployment.Arch, want)
		}
	}
	if _, _, err := Resolve([]byte("all:\n  vars: {vm_arch: riscv64}\n  hosts: {10.10.10.10: {}}\n"), "pigsty.yml"); err == nil {
		t.Error("vm_arch riscv64 resolves; want unknown architecture")
	}
}
