package catalog

import (
	"testing"

	"barn.dev/lib/exitcode"
)

// Every selector form Barn 0.9 documents (reference §5.2, §1.4), resolved
// against the embedded catalog as 0.9 resolves user input: a family or
// alias on the default channel, family:channel, family@version (the exact
// key first, else the numerically newest version on a dot boundary),
// vm_image + vm_version (family@version, written by barn-inventory), and
// no vm_image at all (the catalog's defaults.image; "@version" with
// vm_version alone). Surrounding white space is ignored.
func TestSelectorFormsAgainstEmbeddedCatalog(t *testing.T) {
	c, _, err := OfficialRepository().Embedded()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sel, arch, image, version, boot, status string
	}{
		// no vm_image: defaults.image (u24) on defaults.channel (stable)
		{"", "amd64", "u24", "20260926.0.0", "uefi", "supported"},
		{"@20260911", "arm64", "u24", "20260911.0.0", "uefi", "supported"},
		// family, family:channel
		{"u24", "amd64", "u24", "20260926.0.0", "uefi", "supported"},
		{"u24:stable", "arm64", "u24", "20260926.0.0", "uefi", "supported"},
		{"d12", "amd64", "d12", "20260923.2610.1", "uefi", "supported"},
		{"d13:stable", "amd64", "d13", "20260914.2601.1", "uefi", "supported"},
		{"u26", "amd64", "u26", "20260927.0.0", "uefi", "supported"},
		{"el8", "arm64", "el8", "8.10.20240528.1", "uefi", "supported"},
		{"el10", "amd64", "el10", "10.2.20260525.0", "uefi", "supported"},
		// aliases, alone and with a channel or version
		{"ubuntu", "amd64", "u24", "20260926.0.0", "uefi", "supported"},
		{"noble", "amd64", "u24", "20260926.0.0", "uefi", "supported"},
		{"ubuntu2404:stable", "amd64", "u24", "20260926.0.0", "uefi", "supported"},
		{"jammy", "amd64", "u22", "20260926.0.0", "uefi", "supported"},
		{"resolute", "arm64", "u26", "20260927.0.0", "uefi", "supported"},
		{"debian", "amd64", "d13", "20260914.2601.1", "uefi", "supported"},
		{"trixie", "amd64", "d13", "20260914.2601.1", "uefi", "supported"},
		{"bookworm@20260909", "amd64", "d12", "20260909.2596.1", "uefi", "supported"},
		{"rocky", "amd64", "el9", "9.8.20260525.1", "uefi", "supported"},
		{"rocky10:stable", "amd64", "el10", "10.2.20260525.0", "uefi", "supported"},
		{"centos7", "amd64", "el7", "7.9.20221112.0", "bios", "deprecated"},
		{"c7", "amd64", "el7", "7.9.20221112.0", "bios", "deprecated"},
		// numeric version prefixes: the newest under the prefix, status inherited
		{"el9@9", "amd64", "el9", "9.8.20260525.1", "uefi", "supported"},
		{"el9@9.7", "amd64", "el9", "9.7.20251123.2", "uefi", "supported"},
		{"el9@9.6", "arm64", "el9", "9.6.20250531.0", "uefi", "deprecated"},
		{"rocky9@9.3", "amd64", "el9", "9.3.20231113.0", "uefi", "deprecated"},
		{"el10@10", "amd64", "el10", "10.2.20260525.0", "uefi", "supported"},
		{"el10@10.0", "amd64", "el10", "10.0.20250609.1", "uefi", "deprecated"},
		{"el7@7", "amd64", "el7", "7.9.20221112.0", "bios", "deprecated"},
		{"u22@20260810", "amd64", "u22", "20260810.0.0", "uefi", "supported"},
		// exact version keys
		{"el9@9.7.20251123.2", "amd64", "el9", "9.7.20251123.2", "uefi", "supported"},
		{"d12@20260806.2562.1", "arm64", "d12", "20260806.2562.1", "uefi", "supported"},
		// white space around a selector is ignored
		{"  el9@9.7 ", "amd64", "el9", "9.7.20251123.2", "uefi", "supported"},
	} {
		id, err := c.Resolve(tc.sel, tc.arch)
		if err != nil {
			t.Errorf("Resolve(%q, %s): %v", tc.sel, tc.arch, err)
			continue
		}
		if id.Image != tc.image || id.Version != tc.version || id.Arch != tc.arch || id.Boot != tc.boot || id.Status != tc.status ||
			id.File != DefaultFile(tc.image, tc.version, tc.arch) || id.SizeBytes <= 0 || len(id.SHA256) != 64 {
			t.Errorf("Resolve(%q, %s) = %s@%s %s boot %s status %s file %s; want %s@%s boot %s status %s",
				tc.sel, tc.arch, id.Image, id.Version, id.Arch, id.Boot, id.Status, id.File, tc.image, tc.version, tc.boot, tc.status)
		}
	}
	for _, tc := range []struct{ sel, arch string }{
		{"u24:testing", "amd64"},        // no such channel
		{"el9@9.9", "amd64"},            // no version under 9.9
		{"el9@9.", "amd64"},             // not a release
		{"el9@2025", "amd64"},           // never a prefix inside a component
		{"el10@1", "amd64"},             // "1" is not "10"
		{"U24", "amd64"},                // names are case-sensitive
		{"ubuntu@", "amd64"},            // empty version
		{"el7", "arm64"},                // el7 is amd64 only
		{"fedora", "amd64"},             // unknown family
		{"local-mine", "amd64"},         // no such import
		{"u24:stable:x", "amd64"},       // not a channel name
		{"u24@20260926.0.0", "riscv64"}, // unknown arch
	} {
		_, err := c.Resolve(tc.sel, tc.arch)
		if e := exitcode.As(err); err == nil || e.Class != exitcode.Usage || e.Reason != "unknown_image" {
			t.Errorf("Resolve(%q, %s) = %v, want usage unknown_image", tc.sel, tc.arch, err)
		}
	}
}

// TestArchNormalisation: an architecture is read as Barn 0.9 reads vm_arch,
// lower-cased and trimmed, with "native" and "" meaning the host's.
func TestArchNormalisation(t *testing.T) {
	c, _, err := OfficialRepository().Embedded()
	if err != nil {
		t.Fatal(err)
	}
	native := NativeArch()
	for _, tc := range []struct{ in, want string }{
		{"amd64", "amd64"}, {"AMD64", "amd64"}, {" arm64 ", "arm64"}, {"Arm64\t", "arm64"},
		{"native", native}, {" NATIVE ", native}, {"", native}, {"  ", native},
		// the aliases Barn reads wherever it reads an architecture
		{"x86_64", "amd64"}, {"X64", "amd64"}, {"aarch64", "arm64"}, {" a64", "arm64"},
	} {
		if got := NormalizeArch(tc.in); got != tc.want {
			t.Errorf("NormalizeArch(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if tc.want != "amd64" && tc.want != "arm64" {
			continue // a host arch the catalog does not build for
		}
		id, err := c.Resolve("u24", tc.in)
		if err != nil || id.Arch != tc.want || id.File != DefaultFile("u24", id.Version, tc.want) {
			t.Errorf("Resolve(u24, %q) = %+v, %v; want arch %s", tc.in, id, err, tc.want)
		}
	}
}

// TestEveryAliasOfTheEmbeddedCatalog: each alias of each family resolves,
// alone and on the family's default channel, to exactly what the family
// name resolves to, for every architecture the family builds; and no alias
// belongs to two families.
func TestEveryAliasOfTheEmbeddedCatalog(t *testing.T) {
	c, _, err := OfficialRepository().Embedded()
	if err != nil {
		t.Fatal(err)
	}
	owner := map[string]string{}
	aliases := 0
	for fam, im := range c.Images {
		for _, alias := range im.Aliases {
			if other, dup := owner[alias]; dup {
				t.Errorf("alias %q belongs to %s and %s", alias, other, fam)
			}
			owner[alias] = fam
			aliases++
			for _, arch := range []string{"amd64", "arm64"} {
				want, err := c.Resolve(fam, arch)
				if err != nil {
					if _, aerr := c.Resolve(alias, arch); aerr == nil {
						t.Errorf("alias %s resolves for %s but its family %s does not", alias, arch, fam)
					}
					continue // e.g. el7 has no arm64
				}
				for _, sel := range []string{alias, alias + ":stable", " " + alias + " "} {
					got, err := c.Resolve(sel, arch)
					if err != nil || got.Image != fam || got.Version != want.Version || got.SHA256 != want.SHA256 || got.Boot != want.Boot {
						t.Errorf("Resolve(%q, %s) = %s@%s, %v; want %s@%s", sel, arch, got.Image, got.Version, err, fam, want.Version)
					}
				}
				if f, ok := c.Family(alias); !ok || f != fam {
					t.Errorf("Family(%q) = %q, %v", alias, f, ok)
				}
			}
		}
	}
	if len(c.Images) != 9 || aliases < 9 {
		t.Fatalf("the embedded catalog has %d families and %d aliases; want 0.9's nine families, each with aliases", len(c.Images), aliases)
	}
}
