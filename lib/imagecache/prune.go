package imagecache

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"barn.dev/lib/catalog"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/fileid"
	"barn.dev/lib/imageref"
	"barn.dev/lib/lazyre"
	"barn.dev/lib/state"
)

// PruneResult lists what prune removed (or would remove) and what it kept.
// Paths are relative to the images directory and sorted.
type PruneResult struct {
	Schema     string   `json:"schema"`
	DryRun     bool     `json:"dry_run"`
	Candidates []string `json:"candidates"` // removed, or to be removed with --dry-run
	Protected  []string `json:"protected"`  // kept: active catalogs, applied nodes, imports
	// Kept: set-aside .corrupt-* files no record proves Barn moved there
	// (paths relative to the images directory); they are left alone.
	Kept  []ForeignEntry `json:"kept"`
	Bytes int64          `json:"bytes"` // total size of the candidates
}

// PruneSchema is the schema of PruneResult.
const PruneSchema = "barn.repo.prune/v1"

// Prune removes cached images nothing protects, plus stale staging files
// and the set-aside .corrupt-* files the set-aside record names (by their
// recorded identity; an unrecorded one is kept and listed in Kept). Protected: every artifact of every
// repository's active catalog, the base of every applied node, and every
// imported local image (images/local is never touched). It fails with
// conflict (deployment_busy) while a lifecycle command holds the
// deployment lock, so a base being prepared is never removed. It deletes
// only what Barn's records prove it wrote (ownedFiles): any other entry in
// a family directory — a symlink, a directory, a file no accepted catalog
// names, one whose size differs from the catalog's — is an integrity error
// and nothing is removed.
func Prune(ctx context.Context, root *state.Root, dryRun bool) (*PruneResult, error) {
	res := &PruneResult{Schema: PruneSchema, DryRun: dryRun, Candidates: []string{}, Protected: []string{}, Kept: []ForeignEntry{}}
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
	remove, err := pruneCandidates(root, dir, res)
	if err != nil {
		return nil, err
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
	if err := removeProven(remove); err != nil {
		return nil, err
	}
	if err := forgetRemoved(dir); err != nil {
		return nil, err
	}
	return res, nil
}

// protectedPaths are the cache paths of every active catalog's images and
// of every node's recorded base image.
func protectedPaths(root *state.Root, dir string) (map[string]bool, error) {
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
	return protected, nil
}

// pruneCandidates walks the family directories of the cache dir and
// returns the files prune may delete, each proven Barn's by its records
// and bytes, noting candidates, protected and kept entries in res. Any
// entry it cannot account for refuses the whole prune (unsafe_cache_entry).
func pruneCandidates(root *state.Root, dir string, res *PruneResult) ([]proven, error) {
	protected, err := protectedPaths(root, dir)
	if err != nil {
		return nil, err
	}
	owned, err := ownedFiles(dir)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "reading %s", dir)
	}
	var remove []proven
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == "manifests" || name == "trust" || name == LocalDir || name == localRegistryName || name == setAsideName || name == publishedName:
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
			pr, err := pruneFile(owned, protected, famDir, name, f, res)
			if err != nil {
				return nil, err
			}
			if pr != nil {
				remove = append(remove, *pr)
			}
		}
	}
	return remove, nil
}

// pruneFile judges file f of family directory famDir: kept (a set-aside
// file Barn cannot prove it published), protected, or a candidate (nil,
// or the proven file); any other file refuses the prune.
func pruneFile(owned *cacheRecord, protected map[string]bool, famDir, family string, f os.DirEntry, res *PruneResult) (*proven, error) {
	p := filepath.Join(famDir, f.Name())
	rel := family + "/" + f.Name()
	fi, err := f.Info()
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "reading %s", p)
	}
	why := owned.prove(p, fi)
	if why == errUnrecordedSetAside || why == errForeignSetAside {
		res.Kept = append(res.Kept, ForeignEntry{Path: rel, Why: why})
		return nil, nil
	}
	if why != "" {
		return nil, unprovenEntry(p, why)
	}
	if protected[p] {
		res.Protected = append(res.Protected, rel)
		return nil, nil
	}
	// A published image is deleted only with the catalog's bytes:
	// name and size alone do not prove whose file it is.
	id, why := owned.proveBytes(p)
	if why != "" {
		return nil, unprovenEntry(p, why)
	}
	res.Bytes += fi.Size()
	res.Candidates = append(res.Candidates, rel)
	return &proven{p, id}, nil
}

// unprovenEntry is prune's refusal of a file at p it cannot prove Barn's.
func unprovenEntry(p, why string) error {
	return exitcode.New(exitcode.Integrity, "%s: %s; prune deletes only files Barn's records prove it wrote, and nothing was removed", p, why).
		WithReason("unsafe_cache_entry").WithNext("move " + p + " out of the image cache")
}

// forgetRemoved drops from the set-aside record the files no longer there
// (removed, or gone before); a record left with none is deleted.
func forgetRemoved(dir string) error {
	files, err := readSetAside(dir)
	if err != nil || len(files) == 0 {
		return err
	}
	var left []SetAside
	for _, f := range files {
		if _, err := os.Lstat(filepath.Join(dir, f.Path)); err == nil {
			left = append(left, f)
		}
	}
	if len(left) == len(files) {
		return nil
	}
	return writeSetAside(dir, left)
}

// cacheRecord is what Barn's records say about the files it may have
// written in the family directories: every artifact of every catalog it
// accepted (catalog.Store.AcceptedCatalogs), by cache path.
type cacheRecord struct {
	artifacts map[string]imageref.Identity // CachePath → identity
	digests   map[string]map[string]int64  // family dir → sha256 → size, for staging files
	setAside  map[string]fileid.ID         // path → identity, from the set-aside record: Barn's publications only
	foreign   map[string]bool              // set-aside paths of files Barn did not publish
}

func ownedFiles(imagesDir string) (*cacheRecord, error) {
	cats, err := (&catalog.Store{Dir: imagesDir}).AcceptedCatalogs()
	if err != nil {
		return nil, err
	}
	aside, err := readSetAside(imagesDir)
	if err != nil {
		return nil, err
	}
	r := &cacheRecord{artifacts: map[string]imageref.Identity{}, digests: map[string]map[string]int64{}, setAside: map[string]fileid.ID{}, foreign: map[string]bool{}}
	for _, c := range cats {
		for _, id := range c.Identities() {
			r.add(imagesDir, id)
		}
	}
	for _, a := range aside {
		if a.Published {
			r.setAside[filepath.Join(imagesDir, a.Path)] = a.ID
		} else {
			r.foreign[filepath.Join(imagesDir, a.Path)] = true
		}
	}
	return r, nil
}

// add records id as an artifact Barn may have written at its cache path.
func (r *cacheRecord) add(imagesDir string, id imageref.Identity) {
	p := CachePath(imagesDir, id)
	r.artifacts[p] = id
	d := filepath.Dir(p)
	if r.digests[d] == nil {
		r.digests[d] = map[string]int64{}
	}
	r.digests[d][id.SHA256] = id.SizeBytes
}

var corruptSuffixRE = lazyre.New(`^\.corrupt-[0-9]{8}T[0-9]{6}Z$`)

// isSetAsideName reports whether name has the form Ensure gives a file it
// sets aside, "<name>.corrupt-<UTC>".
func isSetAsideName(name string) bool {
	i := strings.LastIndex(name, ".corrupt-")
	return i > 0 && corruptSuffixRE.MatchString(name[i:])
}

// errUnrecordedSetAside is why a .corrupt-* file the set-aside record does
// not name is kept: Barn did not move it there, or cannot prove it did.
const errUnrecordedSetAside = "a set-aside name that Barn's set-aside record does not name, so Barn cannot prove it moved this file here"

// errForeignSetAside is why a set-aside file Barn moved, but had not
// published, is kept: someone else wrote it at the cache path.
const errForeignSetAside = "Barn set this file aside from a cache path, but it is not a file Barn downloaded there"

// prove returns "" when the file at p (fi from the directory listing, not
// followed) is one Barn wrote by its records, else why not:
//   - a published image: an accepted catalog names exactly this cache
//     path, and the file is read-only with the catalog's byte count (and,
//     before it is deleted, its SHA-256: proveBytes);
//   - a staging file ".staging-<sha256>.partial": a catalog names an
//     artifact with that digest in this directory, and the partial file is
//     no longer than it;
//   - a set-aside "<image>.corrupt-<UTC time>": the set-aside record
//     (SetAside) names it as the file Barn had published at its cache
//     path (the publication record), and it is deleted by the identity
//     recorded there (proveBytes), never by its name.
func (r *cacheRecord) prove(p string, fi os.FileInfo) string {
	if !fi.Mode().IsRegular() {
		return "not a regular file"
	}
	name := filepath.Base(p)
	if id, ok := r.artifacts[p]; ok {
		switch {
		case fi.Size() != id.SizeBytes:
			return fmt.Sprintf("%d bytes where the catalog records %d", fi.Size(), id.SizeBytes)
		case fi.Mode().Perm()&0o222 != 0:
			return fmt.Sprintf("mode %04o; Barn publishes images read-only", fi.Mode().Perm())
		}
		return ""
	}
	if sha, ok := strings.CutPrefix(name, ".staging-"); ok {
		sha, ok = strings.CutSuffix(sha, ".partial")
		size, known := r.digests[filepath.Dir(p)][sha]
		if ok && known && fi.Size() <= size {
			return ""
		}
		return "a staging file of no artifact a catalog Barn accepted names here"
	}
	if isSetAsideName(name) {
		if _, ok := r.setAside[p]; ok {
			return ""
		}
		if r.foreign[p] {
			return errForeignSetAside
		}
		return errUnrecordedSetAside
	}
	return "no catalog Barn accepted names this file"
}

// proveBytes returns the identity of the file at p (lib/fileid, read
// through one descriptor without following a symlink) — what it is then
// deleted by — and "" unless p is a recorded published image whose
// SHA-256, hashed from that descriptor, differs from the catalog's.
// Staging and set-aside files (proven by prove) are not hashed.
func (r *cacheRecord) proveBytes(p string) (fileid.ID, string) {
	if id, ok := r.setAside[p]; ok {
		return id, "" // Remove deletes it only while it is this file
	}
	a, ok := r.artifacts[p]
	var id fileid.ID
	var err error
	if ok {
		id, err = fileid.OfContent(p)
	} else {
		id, err = fileid.Of(p)
	}
	switch {
	case err != nil:
		return id, fmt.Sprintf("unreadable: %v", err)
	case ok && id.SHA256 != a.SHA256:
		return id, fmt.Sprintf("its SHA-256 %s is not the catalog's %s", id.SHA256, a.SHA256)
	}
	return id, ""
}

// proven is a cache file the records proved Barn's, and the identity it
// had then.
type proven struct {
	path string
	id   fileid.ID
}

// removeProven removes each file while it is still the file proven
// (fileid.Remove: moved aside, checked again, then unlinked). One that
// changed since is kept, and stops the removal (integrity,
// unsafe_cache_entry).
func removeProven(files []proven) error {
	for _, f := range files {
		why, err := f.id.Remove(f.path)
		if err != nil {
			return exitcode.Wrap(exitcode.Runtime, err, "removing %s", f.path)
		}
		if why != "" {
			return exitcode.New(exitcode.Integrity, "%s changed after Barn proved it its own (%s); it was kept", f.path, why).
				WithReason("unsafe_cache_entry").WithNext("move " + f.path + " out of the image cache after checking it")
		}
	}
	return nil
}
