package imagecache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"barn.dev/lib/catalog"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/fileid"
	"barn.dev/lib/imageref"
	"barn.dev/lib/safefile"
	"barn.dev/lib/state"
)

// LocalDir is the directory of imported images under the images dir.
const LocalDir = "local"

// CachePath is where id lives in the cache under imagesDir:
// <imagesDir>/<family>/<basename of file>, or <imagesDir>/local/<basename>
// for an imported local image.
func CachePath(imagesDir string, id imageref.Identity) string {
	if catalog.IsLocalName(id.Image) {
		return filepath.Join(imagesDir, LocalDir, path.Base(id.File))
	}
	return filepath.Join(imagesDir, id.Image, path.Base(id.File))
}

// VerifyCached re-verifies a cached file before use: a regular file of
// this user's with no write bits, whose byte count, SHA-256 and qcow2 header match id. Errors
// are integrity (7) with reason "image_mismatch", "image_writable" or
// "bad_qcow2_header"; a missing file is reported with os.ErrNotExist.
func VerifyCached(p string, id imageref.Identity) error {
	_, err := verifyCached(p, id)
	return err
}

// verifyCached is VerifyCached through one descriptor opened without
// following a symlink; it also returns the identity (lib/fileid) of the
// file it judged, zero when it could not open a regular file there.
func verifyCached(p string, id imageref.Identity) (fileid.ID, error) {
	f, fi, err := safefile.Open(p)
	if errors.Is(err, safefile.ErrNotRegular) {
		return fileid.ID{}, exitcode.New(exitcode.Integrity, "%s is not a regular file", p).WithReason("unsafe_image_file")
	}
	if err != nil {
		return fileid.ID{}, err
	}
	defer f.Close()
	fid, err := fileid.OfFile(f)
	if err != nil {
		return fileid.ID{}, exitcode.Wrap(exitcode.Runtime, err, "reading %s", p)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fid, exitcode.New(exitcode.Integrity, "%s is owned by uid %d, not by this user (uid %d); its owner can change it", p, st.Uid, os.Geteuid()).
			WithReason("unsafe_image_file")
	}
	if fi.Mode().Perm()&0o222 != 0 {
		return fid, exitcode.New(exitcode.Integrity, "%s is writable (mode %04o); a verified image is read-only, so it may have been altered", p, fi.Mode().Perm()).
			WithReason("image_writable")
	}
	m, err := measureOpen(p, f, fi)
	if err != nil {
		return fid, err
	}
	return fid, m.Check(id, p)
}

// Cache is the image cache of one state root.
type Cache struct {
	Root   *state.Root
	Puller Puller
	// InUse reports the applied nodes whose base image is at the given
	// cache path; nil means "read node state under Root".
	InUse func(path string) ([]string, error)
}

// Ensure returns the path of a verified cached copy of id, pulling it from
// the repository whose active catalog holds exactly this artifact (same
// file, size and digest) when it is missing. A damaged cached file that no
// applied node uses is moved (never over another file) to
// "<name>.corrupt-<UTC>", recorded with its identity (SetAside), and replaced; a
// damaged one in use is an integrity error. A mismatch never falls back to
// another image; only the official repository's two roots stand in for each
// other, for the same bytes (Puller.Pull). progress receives pull progress
// (see Terminal).
func Ensure(ctx context.Context, root *state.Root, id imageref.Identity, progress io.Writer) (string, error) {
	c := &Cache{Root: root, Puller: Puller{Progress: progress, Now: root.Now}}
	return c.Ensure(ctx, id, nil)
}

// Ensure is the package-level Ensure; src, when non-nil, is the repository
// to pull from instead of searching the active catalogs. A damaged file it
// set aside is told on Puller.Progress; Fetch returns it.
func (c *Cache) Ensure(ctx context.Context, id imageref.Identity, src *catalog.Source) (string, error) {
	e, err := c.Fetch(ctx, id, src)
	if e.SetAside != nil && c.Puller.Progress != nil {
		fmt.Fprintln(c.Puller.Progress, e.SetAside.Notice(c.Root.ImagesDir()))
	}
	return e.Path, err
}

// Ensured is what Fetch did: the verified cached file, and the damaged
// file it set aside first (nil when none), also when the pull then failed.
type Ensured struct {
	Path     string    `json:"path"`
	SetAside *SetAside `json:"set_aside,omitempty"`
}

// Notice is the one line telling the user a file was set aside.
func (s *SetAside) Notice(imagesDir string) string {
	fate := "barn-repo prune deletes it only while it is that same file"
	if !s.Published {
		fate = "Barn did not download that file, so barn-repo prune keeps it: delete it yourself once you no longer need it"
	}
	return fmt.Sprintf("set aside %s as %s (%s); %s",
		filepath.Join(imagesDir, s.From), filepath.Join(imagesDir, s.Path), s.Why, fate)
}

// Fetch is Ensure returning what it did (Ensured).
func (c *Cache) Fetch(ctx context.Context, id imageref.Identity, src *catalog.Source) (Ensured, error) {
	p, aside, err := c.ensure(ctx, id, src)
	return Ensured{Path: p, SetAside: aside}, err
}

func (c *Cache) ensure(ctx context.Context, id imageref.Identity, src *catalog.Source) (string, *SetAside, error) {
	if err := checkEnsurable(id); err != nil {
		return "", nil, err
	}
	imagesDir, err := c.Root.EnsureImagesDir()
	if err != nil {
		return "", nil, err
	}
	dest := CachePath(imagesDir, id)
	// Published files are immutable and renamed into place atomically, so
	// the common case (a verified cached copy) needs no lock.
	if err := VerifyCached(dest, id); err == nil {
		return dest, nil, nil
	}
	lock, err := c.lockImages(ctx)
	if err != nil {
		return "", nil, err
	}
	defer lock.Unlock()
	fid, damaged := verifyCached(dest, id)
	if damaged == nil {
		return dest, nil, nil
	}
	if damaged, err = c.replaceable(dest, id, damaged); err != nil {
		return "", nil, err
	}
	if catalog.IsLocalName(id.Image) {
		return "", nil, exitcode.New(exitcode.Usage, "imported image %s is not in the cache", dest).WithReason("unknown_image").WithNext("barn-repo import FILE --sha256 HEX")
	}
	if src == nil {
		s, err := c.sourceOf(id)
		if err != nil {
			if damaged != nil {
				// nothing can replace it: the file stays where it is
				return "", nil, keepDamage(damaged, "the file is left in place; no fresh copy can be found", err)
			}
			return "", nil, err
		}
		src = &s
	}
	// The publication record must be readable before a pull: a pull whose
	// record then refuses would leave an image Barn never recorded as its.
	if _, err := readPublished(imagesDir); err != nil {
		return "", nil, err
	}
	return c.pull(ctx, imagesDir, dest, id, *src, fid, damaged)
}

// checkEnsurable refuses an incomplete identity and an image name that
// cannot have a cache directory.
func checkEnsurable(id imageref.Identity) error {
	if id.SHA256 == "" || id.SizeBytes <= 0 || id.File == "" {
		return exitcode.New(exitcode.Usage, "image identity %s@%s is incomplete (no file, size or digest)", id.Image, id.Version)
	}
	if !catalog.IsLocalName(id.Image) && !catalog.ValidName(id.Image) {
		// catalogs refuse such names; never let one reach the store's own directories
		return exitcode.New(exitcode.Usage, "image %q cannot have a cache directory (not a valid image name; manifests and trust are the catalog store's)", id.Image).
			WithReason("invalid_image_name")
	}
	return nil
}

// replaceable judges the cached copy's verification failure damaged: nil
// when there is no file (a plain pull); the failure itself as the error
// for an imported image (it cannot be pulled again) and, with a next step,
// for a base nodes use; else damaged, for the pull to set aside.
//
// A damaged cached copy's verification failure is what the user learns
// when no fresh copy can be had, with the lookup or pull failure attached
// — never "not in catalog" or "artifact unavailable" alone.
func (c *Cache) replaceable(dest string, id imageref.Identity, damaged error) (damage, err error) {
	switch {
	case errors.Is(damaged, fs.ErrNotExist):
		return nil, nil
	case catalog.IsLocalName(id.Image):
		return nil, damaged // imported images cannot be pulled again
	}
	users, err := c.users(dest)
	if err != nil {
		return nil, err
	}
	if len(users) > 0 {
		return nil, exitcode.As(damaged).WithNext(fmt.Sprintf("the base is used by %v; it is left in place — destroy those nodes before replacing it", users))
	}
	return damaged, nil
}

// pull fetches id from src to dest and records the publication; a damaged
// copy (fid) is set aside first, and its failure stays in the error when
// no fresh copy arrives.
func (c *Cache) pull(ctx context.Context, imagesDir, dest string, id imageref.Identity, src catalog.Source, fid fileid.ID, damaged error) (string, *SetAside, error) {
	var aside *SetAside
	if damaged != nil {
		var err error
		if aside, err = c.setAside(dest, fid, damaged); err != nil {
			return "", nil, err
		}
	}
	if err := c.Puller.Pull(ctx, src, id, dest); err != nil {
		if damaged != nil {
			return "", aside, keepDamage(damaged, "the damaged file was set aside as "+filepath.Join(c.Root.ImagesDir(), aside.Path)+"; a fresh copy could not be pulled", err)
		}
		return "", nil, err
	}
	if err := notePublished(imagesDir, dest); err != nil {
		return "", aside, err
	}
	return dest, aside, nil
}

// keepDamage is the error of a damaged cached copy that could not be
// replaced: the verification failure (integrity, its reason and detail
// naming file, expected and actual values), with what happened to the
// file (what) and the lookup or pull failure attached in the message, the
// chain and the next step.
func keepDamage(verifyErr error, what string, pullErr error) error {
	e := *exitcode.As(verifyErr)
	p := exitcode.As(pullErr)
	e.Message += fmt.Sprintf(" (%s: %s)", what, p.Message)
	e.Err = errors.Join(verifyErr, pullErr)
	if p.Next != "" {
		e.Next = p.Next
	}
	if e.Class == exitcode.Cancelled || p.Class == exitcode.Cancelled {
		e.Class = exitcode.Cancelled
	}
	return &e
}

// MaxPullWait bounds how long Ensure waits for another process's pull
// holding the image cache lock (1 hour; ctx cancels sooner).
const MaxPullWait = time.Hour

// lockImages takes the image cache lock, waiting through another pull (the
// state lock itself gives up after 30 s) up to MaxPullWait.
func (c *Cache) lockImages(ctx context.Context) (state.Lock, error) {
	deadline := time.Now().Add(MaxPullWait)
	told := false
	for {
		l, err := c.Root.LockImages(ctx, "barn-repo pull", true)
		if err == nil || exitcode.As(err).Reason != "images_busy" || time.Now().After(deadline) {
			return l, err
		}
		if !told && c.Puller.Progress != nil {
			fmt.Fprintf(c.Puller.Progress, "waiting for another process using the image cache (%s)\n", exitcode.As(err).Message)
			told = true
		}
		select {
		case <-ctx.Done():
			return nil, exitcode.Wrap(exitcode.Cancelled, ctx.Err(), "waiting for the image cache")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// sourceOf finds the repository whose active catalog names exactly id.
func (c *Cache) sourceOf(id imageref.Identity) (catalog.Source, error) {
	st := &catalog.Store{Dir: c.Root.ImagesDir()}
	cats, err := st.ActiveCatalogs()
	if err != nil {
		return catalog.Source{}, err
	}
	roots := make([]string, 0, len(cats))
	for r := range cats {
		roots = append(roots, r)
	}
	sort.Strings(roots)
	for _, r := range roots {
		for _, x := range cats[r].Identities() {
			if x.Image == id.Image && x.Version == id.Version && x.Arch == id.Arch && x.File == id.File && x.SHA256 == id.SHA256 && x.SizeBytes == id.SizeBytes {
				return catalog.ParseSource(r, true)
			}
		}
	}
	return catalog.Source{}, exitcode.New(exitcode.Usage, "no active catalog names %s@%s %s with digest %s", id.Image, id.Version, id.Arch, id.SHA256).
		WithReason("image_not_in_catalog").WithNext("barn-repo update")
}

func (c *Cache) users(p string) ([]string, error) {
	if c.InUse != nil {
		return c.InUse(p)
	}
	return NodesUsing(c.Root, p)
}

// NodesUsing lists the applied nodes whose recorded base image is at cache
// path p (sorted).
func NodesUsing(root *state.Root, p string) ([]string, error) {
	names, err := root.NodeNames()
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, n := range names {
		nd, err := root.ReadNode(n)
		if err != nil {
			return nil, err
		}
		if nd != nil && nd.Image.File != "" && CachePath(root.ImagesDir(), nd.Image) == p {
			out = append(out, n)
		}
	}
	return out, nil
}

// Present reports whether the cache under imagesDir already holds id: a
// read-only regular file of exactly id's byte count at CachePath. It reads
// no bytes, so it is cheap enough for every plan; the digest and qcow2
// header are verified before any use (Ensure, VerifyCached).
func Present(imagesDir string, id imageref.Identity) bool {
	fi, err := os.Lstat(CachePath(imagesDir, id))
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o222 == 0 && fi.Size() == id.SizeBytes
}
