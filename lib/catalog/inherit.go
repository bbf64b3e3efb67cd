package catalog

// Inherited values. catalog.json and repo.yaml leave a policy field out
// when it is inherited; these return the value that applies.

// FamilyBoot is the boot mode of family fam: its own, else defaults.boot.
func (c *Catalog) FamilyBoot(fam string) string {
	return or(c.Images[fam].Boot, c.Defaults.Boot)
}

// VersionStatus is the status of a version: its own, else "unknown".
func VersionStatus(v Version) string { return or(v.Status, "unknown") }

// effectiveVariant returns va with boot, status and provenance inherited
// from its version and family filled in.
func (c *Catalog) effectiveVariant(fam string, v Version, va Variant) Variant {
	va.Boot = or(va.Boot, c.FamilyBoot(fam))
	va.Status = or(va.Status, VersionStatus(v))
	va.Provenance = or(va.Provenance, v.Provenance)
	return va
}

// Materialized returns a copy of c with every inherited policy value
// written out (family boot, version status, variant boot, status and
// provenance) and empty alias lists as nil. Two catalogs say the same
// thing exactly when their materialized forms are equal, whatever their
// layout: this is what `barn-repo verify` and `build` compare.
func (c *Catalog) Materialized() *Catalog {
	out := &Catalog{Schema: c.Schema, Revision: c.Revision, Defaults: c.Defaults, Images: make(map[string]Image, len(c.Images))}
	for fam, im := range c.Images {
		m := Image{Boot: c.FamilyBoot(fam), Channels: im.Channels, Versions: make(map[string]Version, len(im.Versions))}
		if len(im.Aliases) > 0 {
			m.Aliases = im.Aliases
		}
		for ver, v := range im.Versions {
			mv := Version{Status: VersionStatus(v), Provenance: v.Provenance, Variants: make(map[string]Variant, len(v.Variants))}
			for arch, va := range v.Variants {
				mv.Variants[arch] = c.effectiveVariant(fam, v, va)
			}
			m.Versions[ver] = mv
		}
		out.Images[fam] = m
	}
	return out
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
