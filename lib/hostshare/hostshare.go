// Package hostshare checks and opens the host directories of vm_shares
// (reference behaviour §3.10): a share source must be a clean absolute
// path to an existing directory owned by the caller (the effective UID),
// with no symlink component, that does not overlap the state root
// (BARN_HOME). It is opened ONCE as a directory descriptor, resolved
// without following any symlink (openat2 RESOLVE_NO_SYMLINKS, or a walk of
// O_NOFOLLOW|O_DIRECTORY opens), and the checks that matter (directory,
// owner) are made on the open descriptor, so a path swapped after the
// check is never what QEMU gets. QEMU inherits the descriptor and opens it
// as /proc/self/fd/N.
//
// Every error is an *exitcode.Error whose Reason is one of the Reason*
// constants.
package hostshare

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/spec"
)

// Reasons of the errors Open returns.
const (
	ReasonNotClean            = "share_source_not_clean"      // not a clean absolute path
	ReasonMissing             = "share_source_missing"        // does not exist (Barn never creates one)
	ReasonNotDirectory        = "share_source_not_directory"  // exists but is not a directory
	ReasonNotOwned            = "share_source_not_owned"      // owned by another UID than the caller's
	ReasonSymlink             = "share_source_symlink"        // a path component is a symlink
	ReasonOverlapsState       = "share_source_overlaps_state" // inside, or a parent of, BARN_HOME
	ReasonUnreadable          = "share_source_unreadable"     // open failed for another reason
	ReasonUnsupportedOnDarwin = "share_unsupported_on_darwin" // QEMU 9p cannot reopen a descriptor on macOS
)

// Options are the environment of the checks.
type Options struct {
	// StateRoot is BARN_HOME (absolute); a share may not overlap it.
	StateRoot string
	// EUID is the UID that must own the share; <0 means os.Geteuid().
	EUID int
	// GOOS is the host OS; "" means runtime.GOOS. On "darwin" every share
	// is refused (ReasonUnsupportedOnDarwin).
	GOOS string
}

func (o Options) euid() int {
	if o.EUID < 0 {
		return os.Geteuid()
	}
	return o.EUID
}

func (o Options) goos() string {
	if o.GOOS == "" {
		return runtime.GOOS
	}
	return o.GOOS
}

// DefaultOptions are the checks for the calling process under stateRoot.
func DefaultOptions(stateRoot string) Options { return Options{StateRoot: stateRoot, EUID: -1} }

// Open checks path and opens it as a read-only directory descriptor
// (close-on-exec; os/exec's ExtraFiles clears that in the child). The
// caller owns the returned file.
func Open(path string, o Options) (*os.File, error) {
	if o.goos() == "darwin" {
		return nil, exitcode.New(exitcode.Capability, "share %s: 9p shares cannot start on macOS hosts (QEMU cannot reopen the directory descriptor)", path).
			WithReason(ReasonUnsupportedOnDarwin).WithNext("remove vm_shares from the inventory on macOS hosts")
	}
	if path == "" || !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return nil, refuse(ReasonNotClean, path, "is not a clean absolute path", "write vm_shares host paths as clean absolute paths, e.g. "+cleanHint(path))
	}
	if err := checkOverlap(path, o.StateRoot); err != nil {
		return nil, err
	}
	if err := walkLstat(path); err != nil {
		return nil, err
	}
	fd, err := openNoSymlinks(path)
	if err != nil {
		return nil, openError(path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, refuse(ReasonUnreadable, path, fmt.Sprintf("cannot be inspected: %v", err), "")
	}
	if !fi.IsDir() {
		f.Close()
		return nil, refuse(ReasonNotDirectory, path, "is not a directory", "share a directory")
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		f.Close()
		return nil, refuse(ReasonUnreadable, path, "has no owner information", "")
	}
	if want := o.euid(); int(st.Uid) != want {
		f.Close()
		return nil, refuse(ReasonNotOwned, path, fmt.Sprintf("is owned by uid %d, not by the caller (uid %d)", st.Uid, want),
			"share a directory you own (Barn never changes ownership)")
	}
	return f, nil
}

// Check runs Open's checks and closes the descriptor.
func Check(path string, o Options) error {
	f, err := Open(path, o)
	if err != nil {
		return err
	}
	return f.Close()
}

// OpenAll opens node's shares in order (descriptor i is the i-th share:
// QEMU inherits it at fd 3+i). On any failure it closes what it opened and
// returns the error prefixed with the node and guest path.
func OpenAll(node string, shares []spec.Share, o Options) ([]*os.File, error) {
	files := make([]*os.File, 0, len(shares))
	for _, s := range shares {
		f, err := Open(s.Host, o)
		if err != nil {
			CloseAll(files)
			e := *exitcode.As(err)
			e.Message = fmt.Sprintf("%s: share for %s: %s", node, s.Guest, e.Message)
			return nil, &e
		}
		files = append(files, f)
	}
	return files, nil
}

// CheckAll is OpenAll followed by CloseAll.
func CheckAll(node string, shares []spec.Share, o Options) error {
	files, err := OpenAll(node, shares, o)
	CloseAll(files)
	return err
}

// CloseAll closes files, ignoring errors (descriptors of directories).
func CloseAll(files []*os.File) {
	for _, f := range files {
		if f != nil {
			_ = f.Close()
		}
	}
}

func refuse(reason, path, what, next string) *exitcode.Error {
	e := exitcode.New(exitcode.Usage, "share source %s %s", path, what).WithReason(reason)
	if next != "" {
		e = e.WithNext(next)
	}
	return e
}

func cleanHint(path string) string {
	if path == "" {
		return "/srv/share"
	}
	if strings.HasPrefix(path, "~") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, strings.TrimPrefix(path, "~"))
		}
	}
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return filepath.Clean(path)
}

// checkOverlap refuses a share that is, contains or lies inside the state
// root (compared both as given and with the state root's symlinks
// resolved).
func checkOverlap(path, root string) error {
	if root == "" {
		return nil
	}
	roots := []string{filepath.Clean(root)}
	if r, err := filepath.EvalSymlinks(root); err == nil && r != roots[0] {
		roots = append(roots, r)
	}
	for _, r := range roots {
		if within(path, r) || within(r, path) {
			return refuse(ReasonOverlapsState, path, "overlaps the Barn state root "+r,
				"share a directory outside "+r)
		}
	}
	return nil
}

// within reports whether p is dir or below it (both clean, absolute).
func within(p, dir string) bool {
	if p == dir || dir == "/" {
		return true
	}
	return strings.HasPrefix(p, dir+"/")
}

// walkLstat gives the precise refusal for a missing path or a symlink
// component (the open below enforces the same without a race).
func walkLstat(path string) error {
	cur := "/"
	for _, c := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		cur = filepath.Join(cur, c)
		fi, err := os.Lstat(cur)
		if errors.Is(err, os.ErrNotExist) {
			return refuse(ReasonMissing, path, "does not exist"+missingPart(cur, path),
				"create "+path+" or fix vm_shares (Barn never creates a share source)")
		}
		if err != nil {
			return refuse(ReasonUnreadable, path, fmt.Sprintf("cannot be inspected: %v", err), "")
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			next := "use the real path in vm_shares"
			if real, err := filepath.EvalSymlinks(path); err == nil {
				next = "use the real path in vm_shares: " + real + " (realpath " + path + ")"
			}
			return refuse(ReasonSymlink, path, "has a symlink component "+cur, next)
		}
		if cur != path && !fi.IsDir() {
			return refuse(ReasonNotDirectory, path, "has a non-directory component "+cur, "share a directory")
		}
	}
	return nil
}

func missingPart(cur, path string) string {
	if cur == path {
		return ""
	}
	return " (" + cur + " is missing)"
}

func openError(path string, err error) error {
	switch {
	case errors.Is(err, syscall.ENOENT):
		return refuse(ReasonMissing, path, "does not exist", "create "+path+" or fix vm_shares (Barn never creates a share source)")
	case errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.EXDEV):
		return refuse(ReasonSymlink, path, "has a symlink component", "use the real path in vm_shares (realpath "+path+")")
	case errors.Is(err, syscall.ENOTDIR):
		return refuse(ReasonNotDirectory, path, "is not a directory", "share a directory")
	}
	return refuse(ReasonUnreadable, path, fmt.Sprintf("cannot be opened: %v", err), "")
}
