package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/quote"
	"barn.dev/lib/vmrecord"
)

// DefaultLockWait bounds how long a waiting LockDeployment or LockNode
// polls a busy lock (10 minutes).
const DefaultLockWait = 10 * time.Minute

// DefaultImagesLockWait bounds how long a waiting LockImages polls (30 s).
const DefaultImagesLockWait = 30 * time.Second

// Root is the state root: BARN_HOME (Dir) and the runtime directory for
// sockets and pidfiles (RuntimeDir). Obtain one with Open or Inspect.
type Root struct {
	Dir        string // absolute, clean; BARN_HOME or $HOME/.barn
	RuntimeDir string // absolute; see the layout table

	// LockWait bounds waiting deployment and node locks (DefaultLockWait);
	// ImagesLockWait bounds the image cache lock (DefaultImagesLockWait).
	// Tests shorten them.
	LockWait       time.Duration
	ImagesLockWait time.Duration
	// Now is the clock used for timestamps (time.Now).
	Now func() time.Time

	uid  int
	held held    // locks this Root holds, for the lock-order check
	seen seenIDs // state documents read or written, by path (removeSeen)
}

// Open resolves the state root from getenv and creates it (0700) when
// missing. BARN_HOME must be absolute, not a symlink and not $HOME itself;
// it defaults to $HOME/.barn. An existing root that is a symlink, not a
// directory, not mode 0700 (any group or world access), or owned by another user is refused
// with an integrity error (7); a bad BARN_HOME value is a usage error (2).
func Open(getenv func(string) string) (*Root, error) {
	r, err := resolve(getenv)
	if err != nil {
		return nil, err
	}
	if err := r.ensureDir(r.Dir, true); err != nil {
		return nil, err
	}
	return r, nil
}

// Inspect resolves and checks the state root like Open but never creates
// anything: a missing root is not an error (every Read returns nil, nil).
// Read-only commands use it.
func Inspect(getenv func(string) string) (*Root, error) {
	r, err := resolve(getenv)
	if err != nil {
		return nil, err
	}
	if err := r.checkDir(r.Dir, true); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return r, nil
}

// Exists reports whether the state root directory exists.
func (r *Root) Exists() bool {
	_, err := os.Lstat(r.Dir)
	return err == nil
}

func resolve(getenv func(string) string) (*Root, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	home := getenv("HOME")
	dir := getenv("BARN_HOME")
	if dir == "" {
		if home == "" || !filepath.IsAbs(home) {
			return nil, exitcode.New(exitcode.Usage, "cannot find the state root: BARN_HOME is unset and HOME is %q", home).
				WithReason("no_state_root").WithNext("export BARN_HOME=/path/to/.barn")
		}
		dir = filepath.Join(home, ".barn")
	}
	if !filepath.IsAbs(dir) {
		return nil, exitcode.New(exitcode.Usage, "BARN_HOME %q is not an absolute path", dir).
			WithReason("invalid_state_root").WithNext("export BARN_HOME=$HOME/.barn")
	}
	dir = filepath.Clean(dir)
	if dir == "/" {
		return nil, exitcode.New(exitcode.Usage, "BARN_HOME must not be /").WithReason("invalid_state_root")
	}
	// The deployment key and known_hosts under BARN_HOME are written into
	// ssh arguments, ssh_config and YAML: refuse a path those cannot carry
	// now rather than after a lab was built.
	if _, err := quote.SSHPath(filepath.Join(dir, "keys")); err != nil {
		return nil, exitcode.New(exitcode.Usage, "BARN_HOME %q cannot be used: %v", dir, err).WithReason("invalid_state_root")
	}
	if _, err := quote.YAML(dir); err != nil {
		return nil, exitcode.New(exitcode.Usage, "BARN_HOME %q cannot be used: %v", dir, err).WithReason("invalid_state_root")
	}
	if home != "" && filepath.IsAbs(home) && sameDir(dir, filepath.Clean(home)) {
		return nil, exitcode.New(exitcode.Usage, "BARN_HOME %s is the home directory itself; use a directory inside it", dir).
			WithReason("invalid_state_root").WithNext("export BARN_HOME=" + filepath.Join(home, ".barn"))
	}
	r := &Root{Dir: dir, LockWait: DefaultLockWait, ImagesLockWait: DefaultImagesLockWait, Now: time.Now, uid: os.Geteuid()}
	rt, err := runtimeDir(getenv, dir)
	if err != nil {
		return nil, err
	}
	r.RuntimeDir = rt
	return r, nil
}

// sameDir reports whether a and b name the same directory, textually or
// through symlinks.
func sameDir(a, b string) bool {
	if a == b {
		return true
	}
	ai, err1 := os.Stat(a)
	bi, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(ai, bi)
}

// runtimeDir picks the runtime directory: BARN_RUNTIME_DIR, else
// <stateRoot>/run. It is never under $XDG_RUNTIME_DIR: systemd removes that
// at the user's last logout while QEMU keeps running, and with it the only
// way to reach the VM's monitors.
func runtimeDir(getenv func(string) string, stateRoot string) (string, error) {
	if d := getenv("BARN_RUNTIME_DIR"); d != "" {
		if !filepath.IsAbs(d) {
			return "", exitcode.New(exitcode.Usage, "BARN_RUNTIME_DIR %q is not an absolute path", d).WithReason("invalid_runtime_dir")
		}
		return filepath.Clean(d), nil
	}
	return filepath.Join(stateRoot, RunDirName), nil
}

func ownerOf(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// checkDir verifies that path is a real directory owned by the user with
// mode 0700: no group or world permission at all, as the README's state
// layout says. root selects the wording. A missing directory
// returns an error wrapping fs.ErrNotExist.
func (r *Root) checkDir(path string, root bool) error {
	what := "state directory"
	if root {
		what = "state root"
	}
	fi, err := os.Lstat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return exitcode.Wrap(exitcode.Runtime, err, "checking %s %s", what, path)
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return integrity(path, "%s is a symlink; Barn never follows a symlinked state directory", what).
			WithNext("replace " + path + " with a real directory (mkdir -m 0700)")
	case !fi.IsDir():
		return rootHint(integrity(path, "%s is not a directory", what), root)
	case ownerOf(fi) != r.uid:
		return rootHint(integrity(path, "%s is owned by uid %d, not by this user (uid %d)", what, ownerOf(fi), r.uid), root)
	case fi.Mode().Perm()&0o077 != 0:
		// The state root is owner-scoped: keys, node documents, seeds and
		// logs are nobody else's to list, read or change.
		return integrity(path, "%s has mode %04o; it must be 0700 (no group or world access)", what, fi.Mode().Perm()).
			WithNext("chmod 0700 " + path)
	}
	return nil
}

// rootHint drops the "barn-state verify" hint from a problem with the state
// root itself: verify would stop at the same error, and no single other
// action is clearly right (move the file aside, or choose another BARN_HOME).
func rootHint(e *exitcode.Error, root bool) *exitcode.Error {
	if root {
		e.Next = ""
	}
	return e
}

// ensureDir creates path (0700, parents as needed) when missing and then
// checks it like checkDir.
func (r *Root) ensureDir(path string, root bool) error {
	err := r.checkDir(path, root)
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "creating %s", filepath.Dir(path))
	}
	if err := os.Mkdir(path, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return exitcode.Wrap(exitcode.Runtime, err, "creating %s", path)
	}
	return r.checkDir(path, root)
}

// ensureSubdir creates <Dir>/<rel...> (each component 0700, checked) and
// returns its path. The root itself must already exist.
func (r *Root) ensureSubdir(rel ...string) (string, error) {
	if err := r.ensureDir(r.Dir, true); err != nil {
		return "", err
	}
	path := r.Dir
	for _, c := range rel {
		path = filepath.Join(path, c)
		if err := r.ensureDir(path, false); err != nil {
			return "", err
		}
	}
	return path, nil
}

// CheckDirs verifies every directory from the state root down to dir
// (which must be the root or below it) like the state directories: real
// directories, not symlinks, owned by the user, mode 0700. The first
// failure is an integrity error naming that directory (with a chmod
// next: hint for a mode); a missing one wraps fs.ErrNotExist.
func (r *Root) CheckDirs(dir string) error {
	rel, err := filepath.Rel(r.Dir, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return exitcode.New(exitcode.Usage, "%s is not under the state root %s", dir, r.Dir)
	}
	if err := r.checkDir(r.Dir, true); err != nil {
		return err
	}
	path := r.Dir
	if rel == "." {
		return nil
	}
	for _, c := range strings.Split(rel, string(filepath.Separator)) {
		path = filepath.Join(path, c)
		if err := r.checkDir(path, false); err != nil {
			return err
		}
	}
	return nil
}

// EnsureNodeDir creates <Dir>/nodes/<node> (0700) when missing and returns
// its path. It refuses an invalid node name (usage) and a node directory or
// nodes/ that is a symlink, not a directory, foreign-owned or not 0700
// (integrity).
func (r *Root) EnsureNodeDir(node string) (string, error) {
	if err := checkNodeName(node); err != nil {
		return "", err
	}
	return r.ensureSubdir(NodesDirName, node)
}

// EnsureLocksDir creates <Dir>/locks (0700) and returns it.
func (r *Root) EnsureLocksDir() (string, error) { return r.ensureSubdir(LocksDirName) }

// EnsureKeysDir creates <Dir>/keys (0700) and returns it.
func (r *Root) EnsureKeysDir() (string, error) { return r.ensureSubdir(KeysDirName) }

// EnsureImagesDir creates <Dir>/images (0700) and returns it.
func (r *Root) EnsureImagesDir() (string, error) { return r.ensureSubdir(ImagesDirName) }

// EnsureRetainedDiskDir creates <Dir>/disks/<node>/<disk> (each 0700).
func (r *Root) EnsureRetainedDiskDir(node, disk string) (string, error) {
	if err := checkNodeName(node); err != nil {
		return "", err
	}
	if !ValidDiskName(disk) {
		return "", exitcode.New(exitcode.Usage, "invalid disk name %q: want a DNS label other than root", disk)
	}
	return r.ensureSubdir(DisksDirName, node, disk)
}

// EnsureNodeRuntime creates the runtime directory and the node's runtime
// directory (0700, owned, not symlinks) and returns the node's runtime
// paths, with the socket length check of NodeRuntime. The default runtime
// directory, <Dir>/run, is created like every state directory (the root
// first).
func (r *Root) EnsureNodeRuntime(node string) (vmrecord.Runtime, error) {
	rt, err := r.NodeRuntime(node)
	if err != nil {
		return vmrecord.Runtime{}, err
	}
	if r.RuntimeDir == filepath.Join(r.Dir, RunDirName) {
		if _, err := r.ensureSubdir(RunDirName); err != nil {
			return vmrecord.Runtime{}, err
		}
	}
	for _, d := range []string{r.RuntimeDir, rt.Directory} {
		if err := r.ensureDir(d, false); err != nil {
			return vmrecord.Runtime{}, err
		}
	}
	return rt, nil
}

// NodeNames returns the names of the node directories under nodes/, sorted.
// A missing nodes/ gives an empty list; an entry that is not a real
// directory with a valid node name is an integrity error naming it.
func (r *Root) NodeNames() ([]string, error) {
	nodes := r.NodesDir()
	if err := r.checkDir(nodes, false); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return []string{}, nil
		}
		return nil, err
	}
	entries, err := os.ReadDir(nodes)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Integrity, err, "reading %s", nodes)
	}
	names := []string{}
	for _, e := range entries {
		p := filepath.Join(nodes, e.Name())
		if !ValidNodeName(e.Name()) {
			return nil, integrity(p, "unexpected entry in %s: not a valid node name", nodes)
		}
		if e.Type()&fs.ModeSymlink != 0 || !e.IsDir() {
			return nil, integrity(p, "node entry is not a real directory")
		}
		names = append(names, e.Name())
	}
	return names, nil // os.ReadDir sorts by name
}

// integrity returns an integrity (7) error naming path, with reason
// "damaged_state" and next "barn-state verify".
func integrity(path, format string, args ...any) *exitcode.Error {
	msg := fmt.Sprintf(format, args...)
	return &exitcode.Error{Class: exitcode.Integrity, Reason: "damaged_state",
		Message: path + ": " + msg, Next: "barn-state verify",
		Detail: Problem{File: path, Class: exitcode.Integrity, Message: msg}}
}
