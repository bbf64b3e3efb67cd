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

// ArchSpellings are the spellings ParseArch accepts (in any case): Barn's
// names first, then the aliases. Shell completion offers them.
var ArchSpellings = []string{"native", "amd64", "arm64", "x86_64", "x64", "aarch64", "a64"}

// ParseArch is the one reader of an architecture a person wrote: a flag
// (barn-plan --arch, barn-repo --arch), BARN_ARCH or vm_arch. It is
// case-insensitive and ignores surrounding white space (AMD64, X86_64 and
// " aarch64 " are read), maps the aliases (CanonicalArch) and returns
// Barn's name: native, amd64 or arm64. Anything else is a Violation
// ("unknown architecture") whose hint names every spelling. Documents Barn
// writes, catalog variant keys and image file names carry Barn's lower-case
// names only and are not read through it.
func ParseArch(a string) (string, *Violation) {
	c := CanonicalArch(a)
	if CheckArch(c) != nil {
		return "", violation("unknown architecture", "write native, amd64 or arm64 (or an alias: x86_64, x64, aarch64, a64; any case)")
	}
	return c, nil
}
