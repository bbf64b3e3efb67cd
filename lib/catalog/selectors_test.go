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
