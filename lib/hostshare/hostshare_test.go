package hostshare

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/spec"
)

// base is a symlink-free temporary directory (TMPDIR itself may sit
// behind a symlink, as /var does on macOS).
func base(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func opts(home string) Options { return Options{StateRoot: home, EUID: os.Geteuid(), GOOS: "linux"} }

func wantRefusal(t *testing.T, err error, class exitcode.Class, reason, msg string) *exitcode.Error {
	t.Helper()
	e := exitcode.As(err)
	if err == nil || e.Class != class || e.Reason != reason {
		t.Fatalf("err = %v (%+v), want %s/%s", err, e, class, reason)
	}
	if !strings.Contains(e.Message, msg) {
		t.Fatalf("message %q does not contain %q", e.Message, msg)
	}
	return e
}

func TestOpenGoodDirectory(t *testing.T) {
	b := base(t)
	dir := filepath.Join(b, "share")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(dir, opts(filepath.Join(b, "home")))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// The descriptor is the directory: reading it lists its entry, and
	// /proc/self/fd/N (what QEMU opens) resolves to the path.
	names, err := f.Readdirnames(-1)
	if err != nil || len(names) != 1 || names[0] != "f" {
		t.Fatalf("entries %v, %v", names, err)
	}
	if target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd()))); err == nil && target != dir {
		t.Fatalf("/proc/self/fd link = %s, want %s", target, dir)
	}
	if err := Check(dir, opts("")); err != nil {
		t.Fatalf("Check: %v", err)
	}
}

func TestRefusesUncleanPaths(t *testing.T) {
	for _, p := range []string{"", "share", "./share", "~/share", "/tmp/../tmp/x", "/tmp/x/", "/tmp//x", "/tmp/./x"} {
		_, err := Open(p, opts(""))
		wantRefusal(t, err, exitcode.Usage, ReasonNotClean, "is not a clean absolute path")
	}
}

func TestRefusesMissingSource(t *testing.T) {
	b := base(t)
	_, err := Open(filepath.Join(b, "nope"), opts(""))
	e := wantRefusal(t, err, exitcode.Usage, ReasonMissing, "does not exist")
	if !strings.Contains(e.Next, "never creates") {
		t.Fatalf("next = %q", e.Next)
	}
	_, err = Open(filepath.Join(b, "nope", "deeper"), opts(""))
	wantRefusal(t, err, exitcode.Usage, ReasonMissing, "("+filepath.Join(b, "nope")+" is missing)")
	if _, err := os.Stat(filepath.Join(b, "nope")); !os.IsNotExist(err) {
		t.Fatal("a missing source was created")
	}
}

func TestRefusesNonDirectory(t *testing.T) {
	b := base(t)
	file := filepath.Join(b, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(file, opts(""))
	wantRefusal(t, err, exitcode.Usage, ReasonNotDirectory, "is not a directory")
	_, err = Open(filepath.Join(file, "below"), opts(""))
	wantRefusal(t, err, exitcode.Usage, ReasonNotDirectory, "non-directory component "+file)
}

func TestRefusesForeignOwner(t *testing.T) {
	b := base(t)
	o := opts("")
	o.EUID = os.Geteuid() + 4242 // the caller is someone else than the owner
	_, err := Open(b, o)
	wantRefusal(t, err, exitcode.Usage, ReasonNotOwned, "not by the caller (uid "+strconv.Itoa(o.EUID)+")")
}

// As root, a directory really owned by another UID is refused with the
// caller's own euid (no injection).
func TestRefusesForeignOwnerReal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: cannot chown a directory to another user")
	}
	dir := filepath.Join(base(t), "theirs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir, DefaultOptions(""))
	wantRefusal(t, err, exitcode.Usage, ReasonNotOwned, "owned by uid 4242")
}

func TestRefusesSymlinkComponents(t *testing.T) {
	b := base(t)
	real := filepath.Join(b, "real")
	if err := os.MkdirAll(filepath.Join(real, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(b, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	// the last component
	_, err := Open(link, opts(""))
	e := wantRefusal(t, err, exitcode.Usage, ReasonSymlink, "has a symlink component "+link)
	if !strings.Contains(e.Next, "use the real path in vm_shares: "+real) {
		t.Fatalf("next = %q, want the realpath suggestion", e.Next)
	}
	// a middle component
	_, err = Open(filepath.Join(link, "sub"), opts(""))
	e = wantRefusal(t, err, exitcode.Usage, ReasonSymlink, "has a symlink component "+link)
	if !strings.Contains(e.Next, filepath.Join(real, "sub")) {
		t.Fatalf("next = %q", e.Next)
	}
	// a dangling symlink is a symlink, not a missing source
	dangling := filepath.Join(b, "dangling")
	if err := os.Symlink(filepath.Join(b, "gone"), dangling); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dangling, opts(""))
	wantRefusal(t, err, exitcode.Usage, ReasonSymlink, "symlink component")
}

// The open itself refuses symlinks (the Lstat walk only words the error):
// a path swapped for a symlink between the walk and the open is never
// followed.
func TestOpenNeverFollowsSymlinks(t *testing.T) {
	b := base(t)
	real := filepath.Join(b, "real")
	if err := os.MkdirAll(filepath.Join(real, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(b, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	for name, open := range map[string]func(string) (int, error){"openNoSymlinks": openNoSymlinks, "openWalk": openWalk} {
		for _, p := range []string{link, filepath.Join(link, "sub")} {
			fd, err := open(p)
			if err == nil {
				syscall.Close(fd)
				t.Fatalf("%s(%s) followed a symlink", name, p)
			}
			if e := exitcode.As(openError(p, err)); e.Reason != ReasonSymlink && e.Reason != ReasonNotDirectory {
				t.Fatalf("%s(%s): %v → %s", name, p, err, e.Reason)
			}
		}
		fd, err := open(filepath.Join(real, "sub"))
		if err != nil {
			t.Fatalf("%s on a real directory: %v", name, err)
		}
		syscall.Close(fd)
	}
}

func TestRefusesOverlapWithStateRoot(t *testing.T) {
	b := base(t)
	home := filepath.Join(b, "home", ".barn")
	if err := os.MkdirAll(filepath.Join(home, "nodes"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{home, filepath.Join(home, "nodes"), filepath.Join(b, "home"), b} {
		_, err := Open(p, opts(home))
		wantRefusal(t, err, exitcode.Usage, ReasonOverlapsState, "overlaps the Barn state root")
	}
	// A state root given through a symlink is compared by its real path too.
	alias := filepath.Join(b, "alias")
	if err := os.Symlink(filepath.Join(b, "home"), alias); err != nil {
		t.Fatal(err)
	}
	_, err := Open(filepath.Join(home, "nodes"), opts(filepath.Join(alias, ".barn")))
	wantRefusal(t, err, exitcode.Usage, ReasonOverlapsState, home)
	// A sibling sharing a name prefix does not overlap.
	sib := filepath.Join(b, "home", ".barn-share")
	if err := os.Mkdir(sib, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Check(sib, opts(home)); err != nil {
		t.Fatalf("sibling %s: %v", sib, err)
	}
}

func TestRefusesEveryShareOnDarwin(t *testing.T) {
	b := base(t)
	o := opts("")
	o.GOOS = "darwin"
	_, err := Open(b, o)
	wantRefusal(t, err, exitcode.Capability, ReasonUnsupportedOnDarwin, "cannot start on macOS")
}

func TestOpenAllNamesNodeAndShareAndClosesOnFailure(t *testing.T) {
	b := base(t)
	good := filepath.Join(b, "good")
	if err := os.Mkdir(good, 0o755); err != nil {
		t.Fatal(err)
	}
	shares := []spec.Share{{Host: good, Guest: "/srv/good"}, {Host: filepath.Join(b, "missing"), Guest: "/srv/missing"}}
	files, err := OpenAll("n1", shares, opts(""))
	if files != nil {
		t.Fatalf("files = %v on failure", files)
	}
	wantRefusal(t, err, exitcode.Usage, ReasonMissing, "n1: share for /srv/missing: share source "+filepath.Join(b, "missing")+" does not exist")
	files, err = OpenAll("n1", shares[:1], opts(""))
	if err != nil || len(files) != 1 {
		t.Fatalf("OpenAll good: %v %v", files, err)
	}
	CloseAll(files)
	if err := CheckAll("n1", []spec.Share{}, opts("")); err != nil {
		t.Fatalf("no shares: %v", err)
	}
}
