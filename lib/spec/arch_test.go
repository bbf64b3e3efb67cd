package spec

import "testing"

func TestCanonicalArchMapsEveryAlias(t *testing.T) {
	for in, want := range map[string]string{
		"amd64": "amd64", "x86_64": "amd64", "X64": "amd64", " x86_64 ": "amd64",
		"arm64": "arm64", "aarch64": "arm64", "A64": "arm64", "AArch64": "arm64",
		"native": "native", "": "", "riscv64": "riscv64", "i386": "i386",
	} {
		if got := CanonicalArch(in); got != want {
			t.Errorf("CanonicalArch(%q) = %q, want %q", in, got, want)
		}
	}
}
