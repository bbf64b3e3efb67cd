package spec

import (
	"strings"
	"testing"
)

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

// ParseArch is the one reader of a person's architecture: every spelling,
// in any case and with white space around it, is Barn's name; anything
// else is refused with a hint naming the spellings.
func TestParseArchReadsEverySpellingInAnyCase(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"native", "native"}, {"NATIVE", "native"}, {" Native\t", "native"},
		{"amd64", "amd64"}, {"AMD64", "amd64"}, {"x86_64", "amd64"}, {"X86_64", "amd64"}, {"x64", "amd64"}, {"X64", "amd64"},
		{"arm64", "arm64"}, {"ARM64", "arm64"}, {"aarch64", "arm64"}, {"AArch64", "arm64"}, {"a64", "arm64"}, {" A64 ", "arm64"},
		{"", ""}, {"riscv64", ""}, {"i386", ""}, {"x86-64", ""}, {"amd 64", ""}, {"arm", ""},
	} {
		got, v := ParseArch(c.in)
		if got != c.want || (v == nil) != (c.want != "") {
			t.Errorf("ParseArch(%q) = %q, %v; want %q", c.in, got, v, c.want)
		}
		if v != nil && (v.Problem != "unknown architecture" || !strings.Contains(v.Hint, "x86_64, x64, aarch64, a64")) {
			t.Errorf("ParseArch(%q): violation %+v does not name the spellings", c.in, v)
		}
	}
	for _, s := range ArchSpellings {
		if _, v := ParseArch(strings.ToUpper(s)); v != nil {
			t.Errorf("ArchSpellings lists %q, which ParseArch refuses in upper case", s)
		}
	}
}
