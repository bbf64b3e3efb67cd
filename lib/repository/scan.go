package repository

import (
	"os"
	"path/filepath"
	"sort"
	"strings"

	"barn.dev/lib/catalog"
	"barn.dev/lib/exitcode"
)

// ScanSchema is the schema of Scan's result document.
const ScanSchema = "barn.repo.scan/v1"

// ScanResult is what a repository directory holds compared with repo.yaml.
// Paths are repository-relative and sorted; lists are never null.
type ScanResult struct {
	Schema    string   `json:"schema"`
	Root      string   `json:"root"`
	Revision  uint64   `json:"revision"`
	Tracked   []string `json:"tracked"`   // named by repo.yaml and present as regular files
	Missing   []string `json:"missing"`   // named by repo.yaml, absent
	Untracked []string `json:"untracked"` // regular files under images/ nobody names
	Unsafe    []Unsafe `json:"unsafe"`    // symlinks, non-regular or group/world-writable entries
}

// Unsafe is one entry that must not be published.
type Unsafe struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Scan observes root against repo.yaml without hashing anything.
func Scan(root string) (*ScanResult, error) {
	if err := CheckRoot(root); err != nil {
		return nil, err
	}
	r, err := ReadRepo(root)
	if err != nil {
		return nil, err
	}
	res := &ScanResult{Schema: ScanSchema, Root: root, Revision: r.Revision,
		Tracked: []string{}, Missing: []string{}, Untracked: []string{}, Unsafe: []Unsafe{}}
	named := map[string]bool{}
	for _, a := range artifacts(r) {
		named[a.File] = true
	}
	seen := map[string]bool{}
	entries, err := os.ReadDir(filepath.Join(root, catalog.ImagesDir))
	if err != nil && !os.IsNotExist(err) {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "listing images")
	}
	for _, e := range entries {
		rel := catalog.ImagesDir + "/" + e.Name()
		fi, err := os.Lstat(filepath.Join(root, rel))
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Runtime, err, "scanning %s", rel)
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			res.Unsafe = append(res.Unsafe, Unsafe{rel, "symlink"})
		case !fi.Mode().IsRegular():
			res.Unsafe = append(res.Unsafe, Unsafe{rel, "not a regular file"})
		case fi.Mode().Perm()&0o022 != 0:
			res.Unsafe = append(res.Unsafe, Unsafe{rel, "writable by group or others"})
		case named[rel]:
			res.Tracked = append(res.Tracked, rel)
			seen[rel] = true
		case strings.HasPrefix(e.Name(), "."):
			res.Unsafe = append(res.Unsafe, Unsafe{rel, "hidden file"})
		default:
			res.Untracked = append(res.Untracked, rel)
		}
		if named[rel] {
			seen[rel] = true
		}
	}
	for f := range named {
		if !seen[f] {
			res.Missing = append(res.Missing, f)
		}
	}
	sort.Strings(res.Tracked)
	sort.Strings(res.Missing)
	sort.Strings(res.Untracked)
	sort.Slice(res.Unsafe, func(i, j int) bool { return res.Unsafe[i].Path < res.Unsafe[j].Path })
	return res, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
