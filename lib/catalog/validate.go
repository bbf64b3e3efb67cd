package catalog

import (
	"fmt"
	"net/url"
	"path"
	"slices"
	"sort"
	"strings"

	"barn.dev/lib/lazyre"
	"barn.dev/lib/spec"
)

var (
	nameRE     = lazyre.New(`^[a-z][a-z0-9-]{0,31}$`)
	releaseRE  = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$`)
	channelRE  = lazyre.New(`^[a-z][a-z0-9-]{0,31}$`)
	userRE     = lazyre.New(`^[a-z_][a-z0-9_-]{0,31}$`)
	basenameRE = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,191}\.qcow2$`)
	sha256RE   = lazyre.New(`^[0-9a-f]{64}$`)
)

// Problem is one validation failure: Field is a dotted path such as
// "images.d12.versions.12.1.variants.amd64.upstream".
type Problem struct {
	Line    int    `json:"line,omitempty"` // repo.yaml line, when known
	Field   string `json:"field"`
	Value   string `json:"value"`
	Message string `json:"message"`
}

func (p Problem) String() string {
	s := p.Field + ": " + p.Message
	if p.Value != "" {
		s += fmt.Sprintf(" (value %q)", p.Value)
	}
	if p.Line > 0 {
		s = fmt.Sprintf("line %d: %s", p.Line, s)
	}
	return s
}

type problems []Problem

func (ps *problems) add(field, value, format string, args ...any) {
	*ps = append(*ps, Problem{Field: field, Value: value, Message: fmt.Sprintf(format, args...)})
}

// ValidName reports whether s is a usable family or alias name: not the
// reserved "local" or "local-*", and not a directory of the catalog store
// (StoreDirNames), which a family's cache directory
// (<images>/<family>) would otherwise be.
func ValidName(s string) bool {
	return nameRE.MatchString(s) && !IsLocalName(s) && !slices.Contains(StoreDirNames, s)
}

// StoreDirNames are the directories the catalog store keeps beside the
// family directories of the image cache (<images>/manifests,
// <images>/trust). No image or alias may be named like them: Barn 0.9
// accepted such a family and then pulled its artifact into the store's
// own directory.
var StoreDirNames = []string{ManifestsDirName, TrustDirName}

// The catalog store's directories under the images directory.
const (
	ManifestsDirName = "manifests" // state.json, versions/
	TrustDirName     = "trust"     // <KEYID>.pub
)

// reservedNames is how the name rule reads in a problem.
const reservedNames = "local, local-*, manifests or trust (names the image cache keeps for itself)"

// IsLocalName reports whether s is in the reserved local namespace: names
// of imported images, which no catalog may shadow.
func IsLocalName(s string) bool { return s == "local" || strings.HasPrefix(s, "local-") }

// ValidRelease reports whether s is a valid version key.
func ValidRelease(s string) bool { return releaseRE.MatchString(s) }

// SafeBasename reports whether s is an acceptable image file name.
func SafeBasename(s string) bool { return basenameRE.MatchString(s) && s == path.Base(s) }

// DefaultFile is the immutable readable name of an artifact:
// "images/<family>-<version>-<arch>.qcow2".
func DefaultFile(family, version, arch string) string {
	return ImagesDir + "/" + family + "-" + version + "-" + arch + ".qcow2"
}

// CheckUpstream validates an upstream provenance URL: https, a host, no
// user, query or fragment, and no moving path segment (latest, current,
// release, or a segment containing ".latest.").
func CheckUpstream(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("not a URL: %v", err)
	}
	switch {
	case u.Scheme != "https":
		return fmt.Errorf("must be an https URL")
	case u.Host == "":
		return fmt.Errorf("has no host")
	case u.User != nil:
		return fmt.Errorf("must not carry credentials")
	case u.RawQuery != "" || u.ForceQuery:
		return fmt.Errorf("must not have a query")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return fmt.Errorf("must not have a fragment")
	}
	for _, seg := range strings.Split(u.Path, "/") {
		l := strings.ToLower(seg)
		if l == "latest" || l == "current" || l == "release" || strings.Contains(l, ".latest.") {
			return fmt.Errorf("path segment %q moves over time; name an immutable artifact", seg)
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// validateShape checks the rules shared by repo.yaml and catalog.json; per
// variant checks are passed in as variant.
func validateShape(ps *problems, schema, wantSchema int, revision uint64, d Defaults, families map[string]familyView) {
	if schema != wantSchema {
		ps.add("schema", fmt.Sprint(schema), "must be %d", wantSchema)
	}
	if revision == 0 {
		ps.add("revision", "0", "must be a positive integer")
	}
	if d.Arch != "native" {
		ps.add("defaults.arch", d.Arch, "must be native")
	}
	if !slices.Contains(Boots, d.Boot) {
		ps.add("defaults.boot", d.Boot, "must be bios or uefi")
	}
	if !channelRE.MatchString(d.Channel) {
		ps.add("defaults.channel", d.Channel, "must match %s", channelRE)
	}
	if len(families) == 0 {
		ps.add("images", "", "must name at least one image")
	}
	if _, ok := families[d.Image]; !ok {
		ps.add("defaults.image", d.Image, "names no image in images")
	}
	owner := map[string]string{}
	for _, name := range sortedKeys(families) {
		validateFamily(ps, name, families[name], d.Channel, owner)
	}
}

// validateFamily checks family name: its name and aliases (unique across
// families: owner maps each name taken to its family), boot, channels
// (defaultChannel among them) and version keys.
func validateFamily(ps *problems, name string, f familyView, defaultChannel string, owner map[string]string) {
	field := "images." + name
	if !ValidName(name) {
		ps.add(field, name, "image name must match %s and not be %s", nameRE, reservedNames)
	}
	if prev, ok := owner[name]; ok {
		ps.add(field, name, "name is already an alias of %s", prev)
	}
	owner[name] = name
	for i, a := range f.aliases {
		af := fmt.Sprintf("%s.aliases[%d]", field, i)
		if !ValidName(a) {
			ps.add(af, a, "alias must match %s and not be %s", nameRE, reservedNames)
		}
		if prev, ok := owner[a]; ok {
			ps.add(af, a, "duplicate: already used by %s", prev)
			continue
		}
		owner[a] = name
	}
	if f.boot != "" && !slices.Contains(Boots, f.boot) {
		ps.add(field+".boot", f.boot, "must be bios or uefi")
	}
	if len(f.versions) == 0 {
		ps.add(field+".versions", "", "must name at least one version")
	}
	if _, ok := f.channels[defaultChannel]; !ok {
		ps.add(field+".channels", "", "must define the default channel %q", defaultChannel)
	}
	for _, ch := range sortedKeys(f.channels) {
		v := f.channels[ch]
		if !channelRE.MatchString(ch) {
			ps.add(field+".channels."+ch, ch, "channel name must match %s", channelRE)
		}
		if !slices.Contains(f.versions, v) {
			ps.add(field+".channels."+ch, v, "targets a version that does not exist")
		}
	}
	for i, v := range f.versions {
		vf := field + ".versions." + v
		if !ValidRelease(v) {
			ps.add(vf, v, "version must match %s", releaseRE)
		}
		for _, w := range f.versions[:i] {
			if CompareVersions(v, w) == 0 {
				ps.add(vf, v, "ranks the same as version %q; numeric versions are ambiguous", w)
			}
		}
	}
}

type familyView struct {
	aliases  []string
	boot     string
	channels map[string]string
	versions []string // sorted
}

// checkStatus accepts "" (inherited) or one of Statuses.
func checkStatus(ps *problems, field, s string) {
	if s == "" {
		return
	}
	if !slices.Contains(Statuses, s) {
		ps.add(field, s, "must be one of %s", strings.Join(Statuses, ", "))
	}
}

func checkCommonVariant(ps *problems, field, arch, upstream, user, boot string) {
	if !slices.Contains(Arches, arch) {
		if c := spec.CanonicalArch(arch); slices.Contains(Arches, c) {
			// Keys name image files and are signed: Barn's names only.
			ps.add(field, arch, "variant must be amd64 or arm64: write %s (%s is read as %s elsewhere, but a catalog's variant keys name its files)", c, arch, c)
		} else {
			ps.add(field, arch, "variant must be amd64 or arm64")
		}
	}
	if upstream != "" {
		if err := CheckUpstream(upstream); err != nil {
			ps.add(field+".upstream", upstream, "%v", err)
		}
	}
	if user != "" && !userRE.MatchString(user) {
		ps.add(field+".source_user", user, "must be a user name matching %s", userRE)
	}
	if boot != "" && !slices.Contains(Boots, boot) {
		ps.add(field+".boot", boot, "must be bios or uefi")
	}
}

// Validate checks repo.yaml's rules and returns every problem found, sorted
// by field.
func (r *Repo) Validate() []Problem {
	var ps problems
	fams := map[string]familyView{}
	for name, im := range r.Images {
		fams[name] = familyView{aliases: im.Aliases, boot: im.Boot, channels: im.Channels, versions: sortedKeys(im.Versions)}
	}
	validateShape(&ps, r.Schema, RepoSchema, r.Revision, r.Defaults, fams)
	for _, name := range sortedKeys(r.Images) {
		eachVariant(&ps, name, r.Images[name].Versions, func(f string, va RepoVariant) {
			if va.File != "" && !SafeBasename(va.File) {
				ps.add(f+".file", va.File, "must be a safe basename ending in .qcow2 (the file lives in images/)")
			}
		})
	}
	return ps
}

// Validate checks catalog.json's rules and returns every problem found.
// Inherited policy fields (family and variant boot, version and variant
// status, source_user) may be absent, as in Barn 0.9's catalogs.
func (c *Catalog) Validate() []Problem {
	var ps problems
	fams := map[string]familyView{}
	for name, im := range c.Images {
		fams[name] = familyView{aliases: im.Aliases, boot: im.Boot, channels: im.Channels, versions: sortedKeys(im.Versions)}
	}
	validateShape(&ps, c.Schema, CatalogSchema, c.Revision, c.Defaults, fams)
	files := map[string]string{}
	for _, name := range sortedKeys(c.Images) {
		eachVariant(&ps, name, c.Images[name].Versions, func(f string, va Variant) {
			checkArtifact(&ps, f, name, va, files)
		})
	}
	return ps
}

// checkArtifact checks the measured fields of catalog.json's variant f of
// family name: file (unique: files maps each file seen to its variant),
// sha256, format and sizes.
func checkArtifact(ps *problems, f, name string, va Variant, files map[string]string) {
	dir, base := path.Split(va.File)
	if !SafeBasename(base) || (dir != ImagesDir+"/" && dir != name+"/") {
		ps.add(f+".file", va.File, "must be images/<name>.qcow2 or %s/<name>.qcow2", name)
	}
	if prev, ok := files[va.File]; ok {
		ps.add(f+".file", va.File, "already used by %s", prev)
	}
	files[va.File] = f
	if !sha256RE.MatchString(va.SHA256) {
		ps.add(f+".sha256", va.SHA256, "must be 64 lower-case hex digits")
	}
	if va.Format != "qcow2" {
		ps.add(f+".format", va.Format, "must be qcow2")
	}
	if va.ArtifactSize <= 0 || va.ArtifactSize > MaxArtifactBytes {
		ps.add(f+".artifact_size", fmt.Sprint(va.ArtifactSize), "must be 1..%d bytes", int64(MaxArtifactBytes))
	}
	if va.VirtualSize <= 0 {
		ps.add(f+".virtual_size", fmt.Sprint(va.VirtualSize), "must be positive")
	}
}

// policy is what repo.yaml's and catalog.json's variants share.
type policy interface {
	policy() (upstream, user, boot, status string)
}

func (v Variant) policy() (string, string, string, string) {
	return v.Upstream, v.SourceUser, v.Boot, v.Status
}

func (v RepoVariant) policy() (string, string, string, string) {
	return v.Upstream, v.SourceUser, v.Boot, v.Status
}

// release is what repo.yaml's and catalog.json's versions share.
type release[V policy] interface {
	release() (status string, variants map[string]V)
}

func (v Version) release() (string, map[string]Variant) { return v.Status, v.Variants }

func (v RepoVersion) release() (string, map[string]RepoVariant) { return v.Status, v.Variants }

// eachVariant walks family name's versions and their variants in sorted
// order, checks the rules repo.yaml and catalog.json share (statuses, at
// least one variant, the arch key, upstream, source_user, boot) and calls
// check with each variant and its field path for the rest.
func eachVariant[R release[V], V policy](ps *problems, name string, versions map[string]R, check func(f string, va V)) {
	for _, v := range sortedKeys(versions) {
		status, variants := versions[v].release()
		vf := "images." + name + ".versions." + v
		checkStatus(ps, vf+".status", status)
		if len(variants) == 0 {
			ps.add(vf+".variants", "", "must name at least one variant")
		}
		for _, arch := range sortedKeys(variants) {
			va := variants[arch]
			f := vf + ".variants." + arch
			upstream, user, boot, vs := va.policy()
			checkCommonVariant(ps, f, arch, upstream, user, boot)
			checkStatus(ps, f+".status", vs)
			check(f, va)
		}
	}
}
