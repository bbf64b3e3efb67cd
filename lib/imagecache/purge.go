package imagecache

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"barn.dev/lib/catalog"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/fileid"
	"barn.dev/lib/state"
)

// PurgeSchema is the schema of PurgeResult.
const PurgeSchema = "barn.repo.purge/v1"

// PurgeResult lists what Purge removed (or would remove with DryRun):
// every file and directory of the image cache, relative to the images
// directory and sorted, and the bytes of the files.
type PurgeResult struct {
	Schema  string   `json:"schema"`
	DryRun  bool     `json:"dry_run"`
	Dir     string   `json:"dir"`
	Removed []string `json:"removed"`
	Bytes   int64    `json:"bytes"`
}

// Purge removes the whole image cache (<BARN_HOME>/images): every cached
// and imported image, every repository's catalog record (activation,
// anti-rollback mark, signer record) and every trusted key, then the
// emptied directories and the images directory itself. It is for leaving
// the machine as before Barn. It deletes only what Barn's records prove
// it wrote, by bytes, never by a name pattern (purgeProof):
//   - a cached image: an accepted catalog names its cache path, and the
//     file is read-only with the catalog's size and SHA-256; an imported
//     one: local-images.json records it, with its size and SHA-256;
//   - a staging file of such an artifact (cacheRecord.prove: the one
//     exception to "by bytes", since its bytes match no record; it is
//     proven by its name's recorded digest and a size bound);
//   - a set-aside .corrupt-* file the set-aside record names, deleted by
//     the identity recorded there (an unrecorded one is foreign), and
//     the record itself (set-aside.json);
//   - the catalog store's files (catalog.Store.OwnedFiles) and
//     local-images.json when it reads as Barn's registry;
//   - a directory Barn makes there (a family directory of a recorded
//     artifact, manifests, manifests/versions, trust, local).
//
// Refusals, before anything is removed: conflict "images_in_use" while any
// node or deployment state exists (a node's base is in the cache),
// conflict "deployment_busy" while a lifecycle command runs, integrity
// "unsafe_cache_entry" naming every entry the records do not prove (a
// symlink, another directory, a file no record names or whose bytes
// differ), each kept, with Detail []ForeignEntry.
func Purge(ctx context.Context, root *state.Root, dryRun bool) (*PurgeResult, error) {
	dir := root.ImagesDir()
	res := &PurgeResult{Schema: PurgeSchema, DryRun: dryRun, Dir: dir, Removed: []string{}}
	if _, err := os.Lstat(dir); os.IsNotExist(err) {
		return res, nil
	}
	dlock, err := root.LockDeployment(ctx, "barn-repo purge", false, nil)
	if err != nil {
		return nil, err
	}
	defer dlock.Unlock()
	lock, err := root.LockImages(ctx, "barn-repo purge", false)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	names, err := root.NodeNames()
	if err != nil {
		return nil, err
	}
	d, err := root.ReadDeployment()
	if err != nil {
		return nil, err
	}
	if len(names) > 0 || d != nil {
		return nil, exitcode.New(exitcode.Conflict, "a deployment is applied (%d node(s) under %s); its nodes' base images are in the cache — destroy the deployment first", len(names), root.NodesDir()).
			WithReason("images_in_use").WithNext("barn-node destroy")
	}
	files, dirs, err := purgeEntries(dir, res)
	if err != nil {
		return nil, err
	}
	for _, p := range dirs[1:] {
		rel, _ := filepath.Rel(dir, p)
		res.Removed = append(res.Removed, rel+"/")
	}
	sort.Strings(res.Removed)
	if dryRun {
		return res, nil
	}
	if err := removeProven(files); err != nil {
		return nil, err
	}
	for i := len(dirs) - 1; i >= 0; i-- { // deepest first; WalkDir lists parents first
		if err := syscall.Rmdir(dirs[i]); err != nil {
			return nil, exitcode.Wrap(exitcode.Runtime, err, "removing %s", dirs[i])
		}
	}
	return res, nil
}

// ForeignEntry is an entry of the image cache that Barn's records do not
// prove it wrote, and why: Purge keeps it.
type ForeignEntry struct {
	Path string `json:"path"`
	Why  string `json:"why"`
}

func foreignEntries(dir string, foreign []ForeignEntry) error {
	names := make([]string, len(foreign))
	for i, f := range foreign {
		names[i] = f.Path + " (" + f.Why + ")"
	}
	return exitcode.New(exitcode.Integrity, "%d entr%s in the image cache Barn's records do not prove it wrote: %s; purge deletes only what they prove, and nothing was removed",
		len(foreign), map[bool]string{true: "y", false: "ies"}[len(foreign) == 1], strings.Join(names, "; ")).
		WithReason("unsafe_cache_entry").WithDetail(foreign).WithNext("move them out of " + dir + " after checking them, then barn-repo purge --yes")
}

// cacheProof is what Purge may delete: the files and directories Barn's
// records prove it wrote under the images directory.
type cacheProof struct {
	dir    string          // the images directory
	images *cacheRecord    // accepted catalogs' and imports' artifacts
	store  map[string]bool // catalog store files and local-images.json
	dirs   map[string]bool // directories Barn makes
}

// purgeEntries walks the cache dir and returns every file (proven Barn's)
// and directory (parents first) to remove, noting the files in res; any
// entry Barn's records do not prove its own refuses the whole purge.
func purgeEntries(dir string, res *PurgeResult) ([]proven, []string, error) {
	proof, err := purgeProof(dir)
	if err != nil {
		return nil, nil, err
	}
	var files []proven
	var dirs []string
	var foreign []ForeignEntry
	err = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if !proof.dirs[p] {
				foreign = append(foreign, ForeignEntry{Path: p, Why: "a directory Barn does not make here"})
				return filepath.SkipDir
			}
			dirs = append(dirs, p)
			return nil
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		id, why := proof.file(p, fi)
		if why != "" {
			foreign = append(foreign, ForeignEntry{Path: p, Why: why})
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		res.Bytes += fi.Size()
		files = append(files, proven{p, id})
		res.Removed = append(res.Removed, rel)
		return nil
	})
	if err != nil {
		return nil, nil, exitcode.Wrap(exitcode.Runtime, err, "reading %s", dir)
	}
	if len(foreign) > 0 {
		return nil, nil, foreignEntries(dir, foreign)
	}
	return files, dirs, nil
}

func purgeProof(dir string) (*cacheProof, error) {
	images, err := ownedFiles(dir)
	if err != nil {
		return nil, err
	}
	local, err := catalog.ReadLocal(dir)
	if err != nil {
		return nil, err
	}
	for _, li := range local.Images {
		images.add(dir, li.Identity(""))
	}
	store, err := (&catalog.Store{Dir: dir}).OwnedFiles()
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(filepath.Join(dir, localRegistryName)); err == nil {
		store[filepath.Join(dir, localRegistryName)] = true // ReadLocal read it as Barn's
	}
	if _, err := os.Lstat(filepath.Join(dir, setAsideName)); err == nil {
		store[filepath.Join(dir, setAsideName)] = true // ownedFiles read it as Barn's
	}
	if _, err := readPublished(dir); err != nil {
		return nil, err
	} else if _, err := os.Lstat(filepath.Join(dir, publishedName)); err == nil {
		store[filepath.Join(dir, publishedName)] = true // read just above as Barn's
	}
	dirs := map[string]bool{dir: true, filepath.Join(dir, LocalDir): true, filepath.Join(dir, catalog.TrustDirName): true,
		filepath.Join(dir, catalog.ManifestsDirName): true, filepath.Join(dir, catalog.ManifestsDirName, "versions"): true}
	for p := range images.artifacts {
		dirs[filepath.Dir(p)] = true
	}
	return &cacheProof{dir: dir, images: images, store: store, dirs: dirs}, nil
}

// file returns the identity of the file at p (fi not followed) and ""
// when Barn's records prove it is one it wrote, else why not.
func (c *cacheProof) file(p string, fi os.FileInfo) (fileid.ID, string) {
	if !fi.Mode().IsRegular() {
		return fileid.ID{}, "not a regular file"
	}
	if !c.store[p] {
		switch filepath.Dir(p) {
		case c.dir, filepath.Join(c.dir, catalog.TrustDirName), filepath.Join(c.dir, catalog.ManifestsDirName), filepath.Join(c.dir, catalog.ManifestsDirName, "versions"):
			return fileid.ID{}, "no record of Barn's proves it wrote this file"
		}
		if why := c.images.prove(p, fi); why != "" {
			return fileid.ID{}, why
		}
	}
	return c.images.proveBytes(p)
}
