package imagecache

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"barn.dev/lib/catalog"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/state"
)

// PruneResult lists what prune removed (or would remove) and what it kept.
// Paths are relative to the images directory and sorted.
type PruneResult struct {
	Schema     string   `json:"schema"`
	DryRun     bool     `json:"dry_run"`
	Candidates []string `json:"candidates"` // removed, or to be removed with --dry-run
	Protected  []string `json:"protected"`  // kept: active catalogs, applied nodes, imports
	Bytes      int64    `json:"bytes"`      // total size of the candidates
}

// PruneSchema is the schema of PruneResult.
const PruneSchema = "barn.repo.prune/v1"

// Prune removes cached images nothing protects, plus stale staging files
// and set-aside .corrupt-* files. Protected: every artifact of every
// repository's active catalog, the base of every applied node, and every
// imported local image (images/local is never touched). It fails with
// conflict (deployment_busy) while a lifecycle command holds the
// deployment lock, so a base being prepared is never removed. An unexpected
// entry (a symlink, a directory inside a family directory, an unknown
// name) is an integrity error: prune deletes only what it can prove it
// owns.
func Prune(ctx context.Context, root *state.Root, dryRun bool) (*PruneResult, error) {
	res := &PruneResult{Schema: PruneSchema, DryRun: dryRun, Candidates: []string{}, Protected: []string{}}
	dir := root.ImagesDir()
	if _, err := os.Lstat(dir); os.IsNotExist(err) {
		return res, nil
	}
	// No lifecycle command may be between verifying a base and committing
	// the node that uses it: prune holds the deployment lock (trying once;
	// busy is a conflict) before the images lock, the order apply uses.
	dlock, err := root.LockDeployment(ctx, "barn-repo prune", false, nil)
	if err != nil {
		return nil, err
	}
	defer dlock.Unlock()
	lock, err := root.LockImages(ctx, "barn-repo prune", true)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	protected := map[string]bool{}
	cats, err := (&catalog.Store{Dir: dir}).ActiveCatalogs()
	if err != nil {
		return nil, err
	}
	for _, c := range cats {
		for _, id := range c.Identities() {
			protected[CachePath(dir, id)] = true
		}
	}
	names, err := root.NodeNames()
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		nd, err := root.ReadNode(n)
		if err != nil {
			return nil, err
		}
		if nd != nil && nd.Image.File != "" {
			protected[CachePath(dir, nd.Image)] = true
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "reading %s", dir)
	}
	var remove []string
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == "manifests" || name == "trust" || name == LocalDir || name == "local-images.json":
			continue
		case e.Type()&os.ModeSymlink != 0 || !e.IsDir() || !catalog.ValidName(name):
			return nil, exitcode.New(exitcode.Integrity, "%s: unexpected entry in the image cache; prune touches only what it owns", filepath.Join(dir, name)).WithReason("unsafe_cache_entry")
		}
		famDir := filepath.Join(dir, name)
		files, err := os.ReadDir(famDir)
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Runtime, err, "reading %s", famDir)
		}
		for _, f := range files {
			p := filepath.Join(famDir, f.Name())
			rel := name + "/" + f.Name()
			owned := strings.HasSuffix(f.Name(), ".qcow2") || (strings.HasPrefix(f.Name(), ".staging-") && strings.HasSuffix(f.Name(), ".partial")) || strings.Contains(f.Name(), ".qcow2.corrupt-")
			if !f.Type().IsRegular() || !owned {
				return nil, exitcode.New(exitcode.Integrity, "%s: unexpected entry in the image cache; prune touches only what it owns", p).WithReason("unsafe_cache_entry")
			}
			if protected[p] {
				res.Protected = append(res.Protected, rel)
				continue
			}
			if fi, err := f.Info(); err == nil {
				res.Bytes += fi.Size()
			}
			res.Candidates = append(res.Candidates, rel)
			remove = append(remove, p)
		}
	}
	if local, err := os.ReadDir(filepath.Join(dir, LocalDir)); err == nil {
		for _, f := range local {
			res.Protected = append(res.Protected, LocalDir+"/"+f.Name())
		}
	}
	sort.Strings(res.Candidates)
	sort.Strings(res.Protected)
	if dryRun {
		return res, nil
	}
	for _, p := range remove {
		if err := os.Remove(p); err != nil {
			return nil, exitcode.Wrap(exitcode.Runtime, err, "removing %s", p)
		}
	}
	return res, nil
}
