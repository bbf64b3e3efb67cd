package catalog

import (
	"fmt"
	"runtime"
	"sort"
	"strings"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/imageref"
	"barn.dev/lib/spec"
)

var _ imageref.Resolver = (*Catalog)(nil)

// NativeArch returns the host's architecture in catalog terms: "amd64" or
// "arm64" (other GOARCH values are returned unchanged and match nothing).
func NativeArch() string { return runtime.GOARCH }

// NormalizeArch reads an architecture as Barn 0.9 reads vm_arch: lower-cased
// and trimmed, its aliases mapped (spec.CanonicalArch), with "" and "native"
// meaning NativeArch. Anything else is
// returned as read (and matches no variant unless it is amd64 or arm64).
func NormalizeArch(arch string) string {
	arch = spec.CanonicalArch(arch) // x86_64, x64 → amd64; aarch64, a64 → arm64
	if arch == "" || arch == "native" {
		return NativeArch()
	}
	return arch
}

// Selector is a parsed image selector.
type Selector struct {
	Name    string // family or alias; "" for the catalog's defaults.image
	Channel string // set for "name:channel"
	Version string // set for "name@version-prefix"
}

// ParseSelector splits a selector, as Barn 0.9 reads user input:
//
//	name            the catalog's default channel of a family or alias
//	name:channel    that channel
//	name@version    that exact version key, else the newest version under
//	                it on a dot-component boundary
//
// Surrounding white space is ignored; names are case-sensitive. An empty
// name ("", ":channel", "@version") stands for the catalog's defaults.image:
// barn-inventory writes "" for a node without vm_image and "@VERSION" for
// vm_version without vm_image, so the catalog in force at plan time
// decides the family (see the package doc of lib/plan).
func ParseSelector(s string) (Selector, error) {
	var sel Selector
	s = strings.TrimSpace(s)
	switch {
	case strings.Contains(s, "@"):
		sel.Name, sel.Version, _ = strings.Cut(s, "@")
		if !ValidRelease(sel.Version) {
			return sel, fmt.Errorf("selector %q: version %q is not a valid release", s, sel.Version)
		}
	case strings.Contains(s, ":"):
		sel.Name, sel.Channel, _ = strings.Cut(s, ":")
		if !channelRE.MatchString(sel.Channel) {
			return sel, fmt.Errorf("selector %q: channel %q is not valid", s, sel.Channel)
		}
	default:
		sel.Name = s
	}
	if sel.Name != "" && !nameRE.MatchString(sel.Name) {
		return sel, fmt.Errorf("selector %q: image name %q must match %s", s, sel.Name, nameRE)
	}
	return sel, nil
}

// Family returns the family name that name (a family or an alias) denotes.
func (c *Catalog) Family(name string) (string, bool) {
	if _, ok := c.Images[name]; ok {
		return name, true
	}
	for _, fam := range sortedKeys(c.Images) {
		for _, a := range c.Images[fam].Aliases {
			if a == name {
				return fam, true
			}
		}
	}
	return "", false
}

// ResolveVersion returns the family and exact version key a selector names
// (see ParseSelector; an empty name is defaults.image): "name" → the
// catalog's default channel; "name:channel" → that channel;
// "name@v" → the exact key v when it exists, else the numerically newest
// version matching v on a dot-component boundary ("@9" picks "9.10" over
// "9.9" and never matches "90.1"). Failures are usage errors with reason
// "unknown_image".
func (c *Catalog) ResolveVersion(selector string) (family, version string, err error) {
	sel, perr := ParseSelector(selector)
	if perr != nil {
		return "", "", unknown("%v", perr)
	}
	if sel.Name == "" {
		sel.Name = c.Defaults.Image
	}
	fam, ok := c.Family(sel.Name)
	if !ok {
		return "", "", unknown("image %q is not in catalog revision %d (images: %s)", sel.Name, c.Revision, strings.Join(sortedKeys(c.Images), ", "))
	}
	im := c.Images[fam]
	switch {
	case sel.Version != "":
		if _, ok := im.Versions[sel.Version]; ok {
			return fam, sel.Version, nil
		}
		var best string
		for v := range im.Versions {
			if MatchesPrefix(v, sel.Version) && (best == "" || CompareVersions(v, best) > 0) {
				best = v
			}
		}
		if best == "" {
			return "", "", unknown("image %s has no version %q or versions under it (versions: %s)", fam, sel.Version, strings.Join(c.versionList(fam), ", "))
		}
		return fam, best, nil
	default:
		ch := sel.Channel
		if ch == "" {
			ch = c.Defaults.Channel
		}
		v, ok := im.Channels[ch]
		if !ok {
			return "", "", unknown("image %s has no channel %q (channels: %s)", fam, ch, strings.Join(sortedKeys(im.Channels), ", "))
		}
		return fam, v, nil
	}
}

func (c *Catalog) versionList(fam string) []string {
	vs := sortedKeys(c.Images[fam].Versions)
	sort.Slice(vs, func(i, j int) bool { return CompareVersions(vs[i], vs[j]) < 0 })
	return vs
}

// Resolve implements imageref.Resolver: selector plus arch ("amd64",
// "arm64", or "native"/"" for NativeArch; read by NormalizeArch) → the
// exact artifact. Unknown selectors, versions or arches are usage errors,
// reason "unknown_image".
func (c *Catalog) Resolve(selector, arch string) (imageref.Identity, error) {
	arch = NormalizeArch(arch)
	if selector = strings.TrimSpace(selector); IsLocalName(selector) {
		if c.local != nil {
			if li, ok := c.local.Lookup(selector); ok {
				if li.Arch != arch {
					return imageref.Identity{}, unknown("imported image %s is %s, not %s", selector, li.Arch, arch)
				}
				return li.Identity(selector), nil
			}
		}
		return imageref.Identity{}, unknown("no imported image is named %s", selector)
	}
	fam, ver, err := c.ResolveVersion(selector)
	if err != nil {
		return imageref.Identity{}, err
	}
	v := c.Images[fam].Versions[ver]
	va, ok := v.Variants[arch]
	if !ok {
		return imageref.Identity{}, unknown("image %s@%s has no %s variant (variants: %s)", fam, ver, arch, strings.Join(sortedKeys(v.Variants), ", "))
	}
	va = c.effectiveVariant(fam, v, va)
	return imageref.Identity{
		Selector: selector, Image: fam, Version: ver, Arch: arch,
		File: va.File, SizeBytes: va.ArtifactSize, SHA256: va.SHA256, VirtualSize: va.VirtualSize,
		Boot: va.Boot, SourceUser: va.SourceUser, Status: va.Status,
	}, nil
}

// Identities lists every artifact of the catalog, sorted by image, version
// and arch.
func (c *Catalog) Identities() []imageref.Identity {
	out := []imageref.Identity{}
	for _, fam := range sortedKeys(c.Images) {
		for _, ver := range c.versionList(fam) {
			for _, arch := range sortedKeys(c.Images[fam].Versions[ver].Variants) {
				id, err := c.Resolve(fam+"@"+ver, arch)
				if err == nil {
					out = append(out, id)
				}
			}
		}
	}
	return out
}

func unknown(format string, args ...any) error {
	return exitcode.New(exitcode.Usage, format, args...).WithReason("unknown_image").WithNext("barn-repo list")
}
