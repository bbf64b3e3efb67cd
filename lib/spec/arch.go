package spec

import "strings"

// archAliases maps the other spellings of an architecture Barn accepts
// wherever it reads one (inventory vm_arch, catalog and CLI --arch) to
// Barn's name: the kernel's and RPM's (x86_64, aarch64) and the short
// ones (x64, a64).
var archAliases = map[string]string{
	"x86_64": "amd64", "x64": "amd64",
	"aarch64": "arm64", "a64": "arm64",
}

// CanonicalArch returns a lower-cased, trimmed a with its aliases mapped to
// Barn's names: x86_64 and x64 to amd64, aarch64 and a64 to arm64. Any
// other value is returned lower-cased and trimmed (CheckArch judges it).
func CanonicalArch(a string) string {
	a = strings.ToLower(strings.TrimSpace(a))
	if c, ok := archAliases[a]; ok {
		return c
	}
	return a
}
