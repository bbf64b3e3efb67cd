// Package repository is the maintainer side of an image repository: a
// static directory holding repo.yaml (intent), images/ (immutable artifact
// bytes), catalog.json (generated evidence) and catalog.json.minisig.
//
// Three verbs, three responsibilities: Scan observes (no hashing), Build
// measures every artifact and replaces catalog.json atomically (never
// touching repo.yaml or image bytes), Verify rebuilds in memory and
// requires byte-identical catalog.json.
//
// Publish order: copy image bytes first, then publish catalog.json and
// catalog.json.minisig together, so a client never sees a catalog naming
// bytes that are not there yet.
package repository

import (
	"fmt"
	"os"
	"path/filepath"

	"barn.dev/lib/catalog"
	"barn.dev/lib/exitcode"
)

// CheckRoot requires root to be an absolute, existing directory that is not
// a symlink and not group- or world-writable; the same for root/images when
// it exists. Errors are usage (not absolute, missing) or integrity
// (unsafe: symlink, writable by others).
func CheckRoot(root string) error {
	if !filepath.IsAbs(root) {
		return exitcode.New(exitcode.Usage, "repository root %q is not absolute", root)
	}
	for _, dir := range []string{root, filepath.Join(root, catalog.ImagesDir)} {
		fi, err := os.Lstat(dir)
		if os.IsNotExist(err) && dir != root {
			continue
		}
		if err != nil {
			return exitcode.Wrap(exitcode.Usage, err, "repository root")
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return exitcode.New(exitcode.Integrity, "%s is a symlink; a repository directory must be real", dir).WithReason("unsafe_repository")
		}
		if !fi.IsDir() {
			return exitcode.New(exitcode.Usage, "%s is not a directory", dir)
		}
		if fi.Mode().Perm()&0o022 != 0 {
			return exitcode.New(exitcode.Integrity, "%s is writable by group or others (mode %04o)", dir, fi.Mode().Perm()).
				WithReason("unsafe_repository").WithNext(fmt.Sprintf("chmod go-w %s", dir))
		}
	}
	return nil
}

// ReadRepo reads and strictly decodes root/repo.yaml.
func ReadRepo(root string) (*catalog.Repo, error) {
	p := filepath.Join(root, catalog.RepoFile)
	data, err := readLimited(p, catalog.MaxCatalogBytes)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, exitcode.New(exitcode.Usage, "%s does not exist; a repository root holds repo.yaml and images/", p).WithReason("no_repo_yaml")
		}
		return nil, exitcode.Wrap(exitcode.Usage, err, "reading %s", p)
	}
	return catalog.DecodeRepo(data, p)
}

func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, larger than the %d byte limit", path, fi.Size(), limit)
	}
	buf := make([]byte, fi.Size())
	_, err = f.ReadAt(buf, 0)
	if err != nil && fi.Size() > 0 {
		return nil, err
	}
	return buf, nil
}

// artifact is one variant of repo.yaml with its repository-relative file.
type artifact struct {
	Family, Version, Arch string
	File                  string // "images/<basename>"
	Variant               catalog.RepoVariant
}

// artifacts lists repo.yaml's variants, sorted by family, version, arch.
func artifacts(r *catalog.Repo) []artifact {
	var out []artifact
	for _, fam := range sortedKeys(r.Images) {
		im := r.Images[fam]
		for _, ver := range sortedKeys(im.Versions) {
			for _, arch := range sortedKeys(im.Versions[ver].Variants) {
				va := im.Versions[ver].Variants[arch]
				file := catalog.DefaultFile(fam, ver, arch)
				if va.File != "" {
					file = catalog.ImagesDir + "/" + va.File
				}
				out = append(out, artifact{fam, ver, arch, file, va})
			}
		}
	}
	return out
}
