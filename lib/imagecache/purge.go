package imagecache

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"

	"barn.dev/lib/catalog"
	"barn.dev/lib/exitcode"
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

// The files Barn writes in the image cache, by place:
//
//	<family>/<file>.qcow2, .staging-<sha256>.partial, <file>.qcow2.corrupt-<time>
//	local/<file>.qcow2|.img (imports) and their staging files; local-images.json
//	manifests/state.json, manifests/versions/v<rev>-<sha256>.json[.<keyid>.minisig]
//	trust/<KEYID>.pub
var (
	cacheImageRE  = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9._+-]*\.qcow2(\.corrupt-[0-9TZ]+)?|\.staging-[0-9a-f]{64}\.partial)$`)
	localImageRE  = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9._+-]{0,191}\.(qcow2|img)|\.staging-[0-9a-f]{64}\.partial)$`)
	versionFileRE = regexp.MustCompile(`^v[0-9]+-[0-9a-f]{64}\.json(\.[0-9a-f]{16}\.minisig)?$`)
	trustKeyRE    = regexp.MustCompile(`^[0-9A-F]{16}\.pub$`)
)

// Purge removes the whole image cache (<BARN_HOME>/images): every cached
// and imported image, every repository's catalog record (activation,
// anti-rollback mark, signer record) and every trusted key, then the
// emptied directories and the images directory itself. It is for leaving
// the machine as before Barn. Refusals, before anything is removed:
// conflict "images_in_use" while any node or deployment state exists (a
// node's base is in the cache), conflict "deployment_busy" while a
// lifecycle command runs, integrity "unsafe_cache_entry" for any entry
// that is not one Barn writes (a symlink, a stray file): Purge deletes only
// what it can prove is the cache's.
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
	var files, dirs []string
	err = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if e.IsDir() {
			if rel != "." && !cacheDir(rel) {
				return unsafeEntry(p)
			}
			dirs = append(dirs, p)
			return nil
		}
		if !e.Type().IsRegular() || !cacheFile(rel) {
			return unsafeEntry(p)
		}
		if fi, err := e.Info(); err == nil {
			res.Bytes += fi.Size()
		}
		files = append(files, p)
		res.Removed = append(res.Removed, rel)
		return nil
	})
	if err != nil {
		if exitcode.ClassOf(err) == exitcode.Integrity {
			return nil, err
		}
		return nil, exitcode.Wrap(exitcode.Runtime, err, "reading %s", dir)
	}
	for _, p := range dirs[1:] {
		rel, _ := filepath.Rel(dir, p)
		res.Removed = append(res.Removed, rel+"/")
	}
	sort.Strings(res.Removed)
	if dryRun {
		return res, nil
	}
	for _, p := range files {
		if err := os.Remove(p); err != nil {
			return nil, exitcode.Wrap(exitcode.Runtime, err, "removing %s", p)
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- { // deepest first; WalkDir lists parents first
		if err := syscall.Rmdir(dirs[i]); err != nil {
			return nil, exitcode.Wrap(exitcode.Runtime, err, "removing %s", dirs[i])
		}
	}
	return res, nil
}

// cacheDir reports whether rel (relative to the images directory) is a
// directory Barn makes there.
func cacheDir(rel string) bool {
	switch rel {
	case "manifests", "manifests/versions", "trust", LocalDir:
		return true
	}
	return !strings.Contains(rel, "/") && catalog.ValidName(rel)
}

// cacheFile reports whether rel is a file Barn writes there.
func cacheFile(rel string) bool {
	d, f := filepath.Split(rel)
	switch strings.TrimSuffix(d, "/") {
	case "":
		return f == "local-images.json"
	case "manifests":
		return f == "state.json"
	case "manifests/versions":
		return versionFileRE.MatchString(f)
	case "trust":
		return trustKeyRE.MatchString(f)
	case LocalDir:
		return localImageRE.MatchString(f)
	}
	return cacheDir(strings.TrimSuffix(d, "/")) && cacheImageRE.MatchString(f)
}

func unsafeEntry(p string) error {
	return exitcode.New(exitcode.Integrity, "%s: unexpected entry in the image cache; purge removes only what Barn writes there — move it away and run again", p).
		WithReason("unsafe_cache_entry")
}
