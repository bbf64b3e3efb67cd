package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"sync"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/imagecache"
	"barn.dev/lib/imageref"
	"barn.dev/lib/state"
)

// ensureImage returns the verified cached file of id (imagecache.Ensure:
// re-verified size, SHA-256 and qcow2 header, or pulled from the active
// catalog's repository; integrity error on any mismatch, no fallback).
// The directories above the file must be the user's own at 0700
// (checkImageDirs). received gets the pull's byte count (Puller.Received).
func ensureImage(ctx context.Context, root *state.Root, id imageref.Identity, progress io.Writer, received func(int64)) (string, error) {
	c := &imagecache.Cache{Root: root, Puller: imagecache.Puller{Progress: progress, Now: root.Now, Received: received}}
	p, err := c.Ensure(ctx, id, nil)
	if err != nil {
		return "", err
	}
	if err := checkImageDirs(root, p); err != nil {
		return "", err
	}
	return p, nil
}

// checkImageDirs refuses a base image whose directories (the state root,
// images/, images/<family>) are not the user's own at 0700: anyone who can
// write one of them can rename another file over the verified one between
// this check and QEMU opening it, so the bytes would no longer be proven.
func checkImageDirs(root *state.Root, p string) error {
	err := root.CheckDirs(filepath.Dir(p))
	if e := exitcode.As(err); e != nil && !errors.Is(err, fs.ErrNotExist) {
		c := *e
		c.Message += "; a base image there could be swapped, not using " + p
		if c.Err == nil {
			c.Err = err
		}
		return &c
	}
	return err
}

// baseCheck is one base image's verification within a command.
type baseCheck struct {
	once sync.Once
	path string // the verified file
	err  error
}

func baseKey(id imageref.Identity) string { return id.Image + "\x00" + id.File + "\x00" + id.SHA256 }

// ensureBase is Images.Ensure of id for node: while it runs, node is
// one of the nodes waiting on id, and every byte count of id's pull goes
// to each of them (Bytes), their phase "pulling IMAGE@VERSION" from the
// first byte. Only one of the waiting calls pulls (the cache's lock);
// the others find the verified file once it is there.
func (m *Manager) ensureBase(ctx context.Context, id imageref.Identity, node string) (string, error) {
	key := baseKey(id)
	m.basesMu.Lock()
	if m.pulls == nil {
		m.pulls = map[string][]string{}
	}
	m.pulls[key] = append(m.pulls[key], node)
	m.basesMu.Unlock()
	defer func() {
		m.basesMu.Lock()
		m.pulls[key] = slices.DeleteFunc(m.pulls[key], func(n string) bool { return n == node })
		m.basesMu.Unlock()
	}()
	phase := "pulling " + id.Image + "@" + id.Version
	return m.Images.Ensure(ctx, id, func(n int64) {
		m.basesMu.Lock()
		waiting := slices.Clone(m.pulls[key])
		m.basesMu.Unlock()
		for _, w := range waiting {
			m.phase(w, phase)
			if m.Bytes != nil {
				m.Bytes(w, n)
			}
		}
	})
}

// verifyBase re-verifies the base image id before a node is started from
// it, once per command: nodes sharing a base wait for the one check, and
// a base this command already verified (a create's Ensure) is not hashed
// again. The result, failure included, holds for the rest of the command.
// It returns the verified file.
func (m *Manager) verifyBase(ctx context.Context, id imageref.Identity) (string, error) {
	c := m.baseCheck(id)
	c.once.Do(func() { c.path, c.err = m.Images.Verify(ctx, id) })
	return c.path, c.err
}

// verifiedBase records that this command verified id at path (Ensure
// succeeded).
func (m *Manager) verifiedBase(id imageref.Identity, path string) {
	c := m.baseCheck(id)
	c.once.Do(func() { c.path = path })
}

func (m *Manager) baseCheck(id imageref.Identity) *baseCheck {
	m.basesMu.Lock()
	defer m.basesMu.Unlock()
	if m.bases == nil {
		m.bases = map[string]*baseCheck{}
	}
	c := m.bases[baseKey(id)]
	if c == nil {
		c = &baseCheck{}
		m.bases[baseKey(id)] = c
	}
	return c
}

// verifyCachedBase is Images.Verify for the real cache: VerifyCached at
// id's cache path; a missing file is an integrity error too, since a
// committed node's overlay backs onto it.
func verifyCachedBase(root *state.Root, id imageref.Identity) (string, error) {
	p := imagecache.CachePath(root.ImagesDir(), id)
	err := checkImageDirs(root, p)
	if err == nil {
		err = imagecache.VerifyCached(p, id)
	}
	switch {
	case err == nil:
		return p, nil
	case errors.Is(err, fs.ErrNotExist):
		return "", exitcode.New(exitcode.Integrity, "base image %s@%s %s is missing at %s; not starting a node whose disk backs onto it", id.Image, id.Version, id.Arch, p).
			WithReason("image_missing").WithNext(fmt.Sprintf("barn-repo pull %s@%s", id.Image, id.Version))
	default:
		e := exitcode.As(err)
		c := *e
		c.Message += "; not starting a node from it"
		if c.Err == nil {
			c.Err = err
		}
		return "", &c
	}
}
