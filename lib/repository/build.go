package repository

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"

	"barn.dev/lib/catalog"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/imagecache"
	"barn.dev/lib/qcow2"
	"barn.dev/lib/safefile"
)

// BuildSchema is the schema of Build's result document.
const BuildSchema = "barn.repo.build/v1"

// BuildResult reports a build.
type BuildResult struct {
	Schema   string `json:"schema"`
	Path     string `json:"path"`     // absolute path of catalog.json
	Revision uint64 `json:"revision"` // catalog revision
	Bytes    int    `json:"bytes"`    // size of catalog.json
	SHA256   string `json:"sha256"`   // digest of catalog.json
	Changed  bool   `json:"changed"`  // false when catalog.json already said this (and was kept)
	// Canonical is false when the kept catalog.json says the same thing in
	// another layout than Encode's (written by hand or another tool).
	Canonical bool        `json:"canonical"`
	QemuImg   bool        `json:"qemu_img"` // artifacts were also checked with qemu-img check
	Scan      *ScanResult `json:"scan"`
}

// Options tune Generate.
type Options struct {
	// SkipQemuImg disables the `qemu-img check` cross-check (it is used
	// whenever qemu-img is installed otherwise).
	SkipQemuImg bool
}

// Generate measures every artifact repo.yaml names and returns the catalog
// and its canonical bytes, without writing anything. A missing artifact is
// a usage error (reason "missing_artifact"); an unsafe or damaged one is an
// integrity error.
func Generate(ctx context.Context, root string, o Options) (*catalog.Catalog, []byte, *ScanResult, bool, error) {
	scan, err := Scan(root)
	if err != nil {
		return nil, nil, nil, false, err
	}
	r, err := ReadRepo(root)
	if err != nil {
		return nil, nil, nil, false, err
	}
	if len(scan.Missing) > 0 {
		return nil, nil, scan, false, exitcode.New(exitcode.Usage, "%s: %s is named by repo.yaml but missing; copy the image in first (images are published before the catalog)",
			root, scan.Missing[0]).WithReason("missing_artifact").WithDetail(scan)
	}
	for _, u := range scan.Unsafe {
		return nil, nil, scan, false, exitcode.New(exitcode.Integrity, "%s: %s is unsafe: %s", root, u.Path, u.Reason).WithReason("unsafe_artifact").WithDetail(scan)
	}
	usedQemuImg := false
	// Policy is copied as written; inherited values stay implicit (Barn
	// 0.9's layout). Only a version without status is written "unknown".
	c := &catalog.Catalog{Schema: catalog.CatalogSchema, Revision: r.Revision, Defaults: r.Defaults, Images: map[string]catalog.Image{}}
	for fam, ri := range r.Images {
		im := catalog.Image{Boot: ri.Boot, Channels: map[string]string{}, Versions: map[string]catalog.Version{}}
		if len(ri.Aliases) > 0 {
			im.Aliases = append([]string{}, ri.Aliases...)
		}
		for ch, v := range ri.Channels {
			im.Channels[ch] = v
		}
		for ver, rv := range ri.Versions {
			im.Versions[ver] = catalog.Version{Status: catalog.VersionStatus(catalog.Version{Status: rv.Status}), Provenance: rv.Provenance, Variants: map[string]catalog.Variant{}}
		}
		c.Images[fam] = im
	}
	for _, a := range artifacts(r) {
		if err := ctx.Err(); err != nil {
			return nil, nil, scan, false, exitcode.Wrap(exitcode.Cancelled, err, "build cancelled")
		}
		path := filepath.Join(root, a.File)
		m, err := imagecache.MeasureFile(path)
		if err != nil {
			return nil, nil, scan, false, err
		}
		if m.SizeBytes > catalog.MaxArtifactBytes {
			return nil, nil, scan, false, exitcode.New(exitcode.Usage, "%s is %d bytes, above the %d byte artifact limit", a.File, m.SizeBytes, int64(catalog.MaxArtifactBytes)).WithReason("artifact_too_large")
		}
		if !o.SkipQemuImg {
			switch _, err := qcow2.Check(ctx, path); {
			case errors.Is(err, qcow2.ErrNoQemuImg):
			case err != nil:
				return nil, nil, scan, false, exitcode.Wrap(exitcode.Integrity, err, "%s", a.File).WithReason("bad_qcow2")
			default:
				usedQemuImg = true
			}
		}
		c.Images[a.Family].Versions[a.Version].Variants[a.Arch] = catalog.Variant{
			File: a.File, Upstream: a.Variant.Upstream, SHA256: m.SHA256, Format: "qcow2",
			ArtifactSize: m.SizeBytes, VirtualSize: m.Header.VirtualSize, SourceUser: a.Variant.SourceUser,
			Boot: a.Variant.Boot, Status: a.Variant.Status, Provenance: a.Variant.Provenance,
		}
	}
	if ps := c.Validate(); len(ps) > 0 {
		return nil, nil, scan, false, exitcode.New(exitcode.Usage, "generated catalog is invalid: %s", ps[0]).WithReason("invalid_repo_yaml").WithDetail(ps)
	}
	data, err := catalog.Encode(c)
	if err != nil {
		return nil, nil, scan, false, exitcode.Wrap(exitcode.Runtime, err, "encoding catalog")
	}
	return c, data, scan, usedQemuImg, nil
}

// Build generates catalog.json and replaces it atomically (mode 0644). It
// refuses (conflict) a revision lower than the existing catalog's, and the
// same revision with different content ("bump the revision"). An existing
// catalog that already says the same thing is kept byte for byte with
// Changed false, even in another writer's layout (Canonical false): clients
// that accepted those bytes would refuse new bytes at the same revision as
// equivocation. It never writes repo.yaml or images.
func Build(ctx context.Context, root string, o Options) (*BuildResult, error) {
	c, data, scan, usedQemuImg, err := Generate(ctx, root, o)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(root, catalog.CatalogFile)
	res := &BuildResult{Schema: BuildSchema, Path: path, Revision: c.Revision, Bytes: len(data), SHA256: sha(data), Canonical: true, QemuImg: usedQemuImg, Scan: scan}
	old, err := readLimited(path, catalog.MaxCatalogBytes)
	switch {
	case os.IsNotExist(err):
	case err != nil:
		return nil, exitcode.Wrap(exitcode.Integrity, err, "reading the existing catalog").WithReason("invalid_catalog")
	default:
		prev, derr := catalog.DecodeCatalog(old, path)
		if derr != nil {
			return nil, exitcode.As(derr).WithNext("inspect " + path + "; move it aside only if you are sure it was never published")
		}
		switch {
		case bytes.Equal(old, data):
			return res, nil
		case SameContent(prev, c):
			res.Bytes, res.SHA256, res.Canonical = len(old), sha(old), false
			return res, nil
		case c.Revision < prev.Revision:
			return nil, exitcode.New(exitcode.Conflict, "repo.yaml revision %d is lower than the published catalog's revision %d; clients would refuse it as a rollback", c.Revision, prev.Revision).
				WithReason("revision_lower").WithNext("set revision in repo.yaml above " + itoa(prev.Revision))
		case c.Revision == prev.Revision:
			return nil, exitcode.New(exitcode.Conflict, "catalog.json already has revision %d with different contents; clients would refuse the change as equivocation: bump the revision", c.Revision).
				WithReason("bump_revision").WithNext("set revision in repo.yaml to " + itoa(prev.Revision+1)).WithDetail(diffCatalogs(prev, c))
		}
	}
	if err := safefile.Write(path, data, 0o644); err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "writing %s", path)
	}
	res.Changed = true
	return res, nil
}

// SameContent reports whether two catalogs say the same thing: equal once
// every inherited value is written out (catalog.Materialized), whatever
// their field order, indentation or explicitly repeated inherited fields.
func SameContent(a, b *catalog.Catalog) bool {
	x, errX := catalog.Encode(a.Materialized())
	y, errY := catalog.Encode(b.Materialized())
	return errX == nil && errY == nil && bytes.Equal(x, y)
}

// VerifySchema is the schema of Verify's result document.
const VerifySchema = "barn.repo.verify/v1"

// VerifyResult reports a successful verify.
type VerifyResult struct {
	Schema   string `json:"schema"`
	Path     string `json:"path"`
	Revision uint64 `json:"revision"`
	SHA256   string `json:"sha256"` // digest of catalog.json as published
	// Canonical is true when catalog.json is byte-identical to the rebuild;
	// false when it says the same in another layout (another writer).
	Canonical bool `json:"canonical"`
	QemuImg   bool `json:"qemu_img"`
}

// Verify rebuilds the catalog in memory and compares it with catalog.json.
// It passes when the bytes are identical, or when catalog.json says the
// same thing in another layout (Canonical false). A difference in content
// (a policy edit or an image change that was not rebuilt) is an integrity
// error, reason "catalog_stale", whose Detail lists the differing fields;
// a catalog.json that does not decode is the decoder's integrity error.
func Verify(ctx context.Context, root string, o Options) (*VerifyResult, error) {
	c, data, _, usedQemuImg, err := Generate(ctx, root, o)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(root, catalog.CatalogFile)
	old, err := readLimited(path, catalog.MaxCatalogBytes)
	if os.IsNotExist(err) {
		return nil, exitcode.New(exitcode.Usage, "%s does not exist", path).WithReason("no_catalog").WithNext("barn-repo build --root " + root)
	}
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Integrity, err, "reading catalog")
	}
	res := &VerifyResult{Schema: VerifySchema, Path: path, Revision: c.Revision, SHA256: sha(old), Canonical: true, QemuImg: usedQemuImg}
	if bytes.Equal(old, data) {
		return res, nil
	}
	prev, err := catalog.DecodeCatalog(old, path)
	if err != nil {
		return nil, err
	}
	if SameContent(prev, c) {
		res.Canonical = false
		return res, nil
	}
	diffs := diffCatalogs(prev, c)
	msg := "catalog.json does not match repo.yaml and images/: it was not rebuilt after a change"
	if len(diffs) > 0 {
		msg += " (" + diffs[0]
		if len(diffs) > 1 {
			msg += ", and " + itoa(uint64(len(diffs)-1)) + " more"
		}
		msg += ")"
	}
	return nil, exitcode.New(exitcode.Integrity, "%s: %s", path, msg).WithReason("catalog_stale").
		WithNext("barn-repo build --root " + root).WithDetail(diffs)
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
