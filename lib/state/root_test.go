package state

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/vmrecord"
)

func wantClass(t *testing.T, err error, class exitcode.Class, substr string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s containing %q", class, substr)
	}
	e := exitcode.As(err)
	if e.Class != class {
		t.Fatalf("class = %s, want %s (error: %v)", e.Class, class, err)
	}
	if !strings.Contains(e.Message, substr) {
		t.Fatalf("error %q does not contain %q", e.Message, substr)
	}
}

func TestOpenCreatesRoot0700(t *testing.T) {
	home := t.TempDir()
	r, err := Open(envOf(map[string]string{"HOME": home}))
	if err != nil {
		t.Fatal(err)
	}
	if r.Dir != filepath.Join(home, ".barn") {
		t.Fatalf("Dir = %s, want %s/.barn", r.Dir, home)
	}
	fi, err := os.Stat(r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 || !fi.IsDir() {
		t.Fatalf("mode = %v, want drwx------", fi.Mode())
	}
}

func TestOpenRejections(t *testing.T) {
	home := t.TempDir()
	real := filepath.Join(home, "real")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(home, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	gw := filepath.Join(home, "groupwritable")
	if err := os.Mkdir(gw, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(gw, 0o770); err != nil {
		t.Fatal(err)
	}
	ww := filepath.Join(home, "worldwritable")
	if err := os.Mkdir(ww, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(ww, 0o707); err != nil {
		t.Fatal(err)
	}
	readable := filepath.Join(home, "readable")
	if err := os.Mkdir(readable, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(readable, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(home, "file")
	writeRaw(t, file, "x", 0o600)

	cases := []struct {
		name, barnHome string
		class          exitcode.Class
		substr         string
	}{
		{"relative", "rel/.barn", exitcode.Usage, "not an absolute path"},
		{"home itself", home, exitcode.Usage, "home directory itself"},
		{"home itself with slash", home + "/", exitcode.Usage, "home directory itself"},
		{"symlinked root", link, exitcode.Integrity, "is a symlink"},
		{"group-writable", gw, exitcode.Integrity, "must be 0700"},
		{"world-writable", ww, exitcode.Integrity, "must be 0700"},
		{"0755, which the README's 0700 does not allow", readable, exitcode.Integrity, "has mode 0755; it must be 0700"},
		{"not a directory", file, exitcode.Integrity, "not a directory"},
		{"an environment reference ssh would expand", home + "/${USER}/.barn", exitcode.Usage, "cannot be used"},
		{"a line break", home + "/a\nb", exitcode.Usage, "cannot be used"},
		{"invalid UTF-8", home + "/\xff", exitcode.Usage, "cannot be used"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Open(envOf(map[string]string{"HOME": home, "BARN_HOME": c.barnHome}))
			wantClass(t, err, c.class, c.substr)
			_, err = Inspect(envOf(map[string]string{"HOME": home, "BARN_HOME": c.barnHome}))
			wantClass(t, err, c.class, c.substr)
		})
	}
	if _, err := Open(envOf(map[string]string{})); err == nil {
		t.Fatal("Open without HOME and BARN_HOME succeeded")
	}
	// Spaces, commas, '#', quotes, '%' and non-ASCII text are fine.
	odd := filepath.Join(home, `barn home, #1 'q' "d" 100% é`)
	if _, err := Open(envOf(map[string]string{"HOME": home, "BARN_HOME": odd})); err != nil {
		t.Fatalf("Open(%q): %v", odd, err)
	}
}

func TestOpenForeignOwned(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown a directory to another user")
	}
	home := t.TempDir()
	dir := filepath.Join(home, "foreign")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	_, err := Open(envOf(map[string]string{"HOME": home, "BARN_HOME": dir}))
	wantClass(t, err, exitcode.Integrity, "owned by uid 4242")
}

func TestInspectCreatesNothing(t *testing.T) {
	home := t.TempDir()
	r, err := Inspect(envOf(map[string]string{"HOME": home}))
	if err != nil {
		t.Fatal(err)
	}
	if r.Exists() {
		t.Fatal("Inspect created the root")
	}
	d, err := r.ReadDeployment()
	if d != nil || err != nil {
		t.Fatalf("ReadDeployment on a missing root = %v, %v; want nil, nil", d, err)
	}
	names, err := r.NodeNames()
	if err != nil || len(names) != 0 || names == nil {
		t.Fatalf("NodeNames = %#v, %v; want [], nil", names, err)
	}
	if _, err := os.Lstat(filepath.Join(home, ".barn")); !os.IsNotExist(err) {
		t.Fatalf("root exists after read-only use: %v", err)
	}
}

// TestRuntimeDir: the runtime directory (QMP sockets, pidfiles) lives in
// the state root by default, never under $XDG_RUNTIME_DIR, which systemd
// removes at the user's last logout while QEMU keeps running.
func TestRuntimeDir(t *testing.T) {
	xdg := t.TempDir()
	if err := os.Chmod(xdg, 0o700); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	open := func(env map[string]string) (*Root, error) {
		t.Helper()
		env["HOME"] = home
		return Inspect(envOf(env))
	}
	for name, env := range map[string]map[string]string{
		"owned 0700 XDG_RUNTIME_DIR": {"XDG_RUNTIME_DIR": xdg},
		"no XDG_RUNTIME_DIR":         {},
	} {
		r, err := open(env)
		if err != nil || r.RuntimeDir != filepath.Join(home, ".barn", "run") {
			t.Errorf("%s: runtime = %v %v, want %s/.barn/run", name, r, err, home)
		}
	}
	if r, _ := open(map[string]string{"BARN_HOME": "/srv/lab"}); r.RuntimeDir != "/srv/lab/run" {
		t.Errorf("BARN_HOME=/srv/lab: runtime = %s, want /srv/lab/run", r.RuntimeDir)
	}
	if r, _ := open(map[string]string{"BARN_RUNTIME_DIR": "/r/", "XDG_RUNTIME_DIR": xdg}); r.RuntimeDir != "/r" {
		t.Errorf("BARN_RUNTIME_DIR: runtime = %s, want /r", r.RuntimeDir)
	}
	_, err := open(map[string]string{"BARN_RUNTIME_DIR": "rel/run"})
	wantClass(t, err, exitcode.Usage, "BARN_RUNTIME_DIR")
}

// TestDefaultRuntimeDirIsAStateDirectory: <BARN_HOME>/run is created 0700
// like every state directory, and verify holds it to the same rule.
func TestDefaultRuntimeDirIsAStateDirectory(t *testing.T) {
	home := t.TempDir()
	r, err := Open(envOf(map[string]string{"HOME": home}))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := r.EnsureNodeRuntime("pg-1")
	if err != nil {
		t.Fatal(err)
	}
	if rt.Directory != filepath.Join(home, ".barn", "run", "pg-1") {
		t.Fatalf("runtime directory %s", rt.Directory)
	}
	for _, d := range []string{r.RuntimeDir, rt.Directory} {
		if fi, err := os.Lstat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v %v, want a 0700 directory", d, fi, err)
		}
	}
	if probs := r.Verify(); len(probs) != 0 {
		t.Fatalf("verify of a fresh runtime directory: %v", probs)
	}
	if err := os.Chmod(r.RuntimeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if probs := r.Verify(); len(probs) != 1 || probs[0].File != r.RuntimeDir {
		t.Fatalf("verify of a 0755 runtime directory: %v, want one problem naming it", probs)
	}
	_, err = r.EnsureNodeRuntime("pg-2")
	wantClass(t, err, exitcode.Integrity, "0700")
}

func TestNodeRuntimeSocketLimit(t *testing.T) {
	r := &Root{Dir: "/b", RuntimeDir: "/run/user/1000/barn"}
	rt, err := r.NodeRuntime("pg-meta-1")
	if err != nil {
		t.Fatal(err)
	}
	want := vmrecord.Runtime{Directory: "/run/user/1000/barn/pg-meta-1", QMP: "/run/user/1000/barn/pg-meta-1/qmp.sock",
		BarnQMP: "/run/user/1000/barn/pg-meta-1/barn-qmp.sock", Pidfile: "/run/user/1000/barn/pg-meta-1/qemu.pid"}
	if rt != want {
		t.Fatalf("NodeRuntime = %+v, want %+v", rt, want)
	}
	// 107 bytes exactly is allowed for the longest socket (Barn's own
	// monitor); 108 is refused, naming path and length.
	node := "n"
	base := "/r/"
	pad := MaxSocketPath - len(base) - len("/"+node+"/"+BarnQMPSocketName)
	r.RuntimeDir = base + strings.Repeat("x", pad)
	rt, err = r.NodeRuntime(node)
	if err != nil || len(rt.BarnQMP) != MaxSocketPath {
		t.Fatalf("107-byte socket: %v, len %d", err, len(rt.BarnQMP))
	}
	// One byte more: a node name too long for the socket gets the short
	// directory @<16 hex of SHA-256(name)>, which no node name can spell.
	r.RuntimeDir = "/home/someone-with-a-long-name/.barn/run"
	long := strings.Repeat("n", 63) // the longest node name
	rt, err = r.NodeRuntime(long)
	if err != nil || rt.Directory != r.RuntimeDir+"/@73dcf996417209ec" || len(rt.BarnQMP) > MaxSocketPath {
		t.Fatalf("a 63-byte node name: %+v %v", rt, err)
	}
	if other, _ := r.NodeRuntime(strings.Repeat("n", 62) + "m"); other.Directory == rt.Directory {
		t.Fatal("two long node names share a runtime directory")
	}
	// Too deep even for that: refused, naming the path and its length.
	r.RuntimeDir = base + strings.Repeat("x", 80)
	_, err = r.NodeRuntime(long)
	wantClass(t, err, exitcode.Usage, "qmp.sock is 110 bytes")
	if e := exitcode.As(err); !strings.Contains(e.Message, "/@73dcf996417209ec/") || !strings.Contains(e.Next, "BARN_RUNTIME_DIR") {
		t.Fatalf("error does not name the path or the way out: %v", err)
	}
}

func TestEnsureNodeDir(t *testing.T) {
	r := testRoot(t)
	dir, err := r.EnsureNodeDir("pg-1")
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Lstat(dir)
	if fi.Mode().Perm() != 0o700 {
		t.Fatalf("node dir mode %v", fi.Mode())
	}
	for _, bad := range []string{"", "..", "../x", "a/b", "Upper", "-x"} {
		if _, err := r.EnsureNodeDir(bad); exitcode.ClassOf(err) != exitcode.Usage {
			t.Errorf("EnsureNodeDir(%q) = %v, want usage", bad, err)
		}
	}
	// A symlinked node directory is refused, not followed.
	other := t.TempDir()
	if err := os.Symlink(other, r.NodeDir("pg-2")); err != nil {
		t.Fatal(err)
	}
	_, err = r.EnsureNodeDir("pg-2")
	wantClass(t, err, exitcode.Integrity, "symlink")
	_, err = r.ReadNode("pg-2")
	wantClass(t, err, exitcode.Integrity, "symlink")
	_, err = r.NodeNames()
	wantClass(t, err, exitcode.Integrity, "not a real directory")
}

func TestLayoutTable(t *testing.T) {
	r := &Root{Dir: "/h/.barn", RuntimeDir: "/run/barn"}
	got := map[string]string{
		r.DeploymentFile():                        "/h/.barn/state.json",
		r.NodesDir():                              "/h/.barn/nodes",
		r.NodeDir("a"):                            "/h/.barn/nodes/a",
		r.NodeFile("a", NodeStateName):            "/h/.barn/nodes/a/state.json",
		r.NodeFile("a", JournalName):              "/h/.barn/nodes/a/prepare.json",
		r.NodeFile("a", TransactionName):          "/h/.barn/nodes/a/transaction.json",
		r.NodeFile("a", RootDiskName):             "/h/.barn/nodes/a/root.qcow2",
		r.NodeFile("a", SeedName):                 "/h/.barn/nodes/a/seed.iso",
		r.NodeFile("a", NVRAMName):                "/h/.barn/nodes/a/nvram.fd",
		r.NodeFile("a", SerialLogName):            "/h/.barn/nodes/a/serial.log",
		r.NodeFile("a", QEMULogName):              "/h/.barn/nodes/a/qemu.log",
		r.NodeFile("a", DataDiskFileName("data")): "/h/.barn/nodes/a/data.qcow2",
		r.KeysDir():                               "/h/.barn/keys",
		r.RetainedDiskDir("a", "data"):            "/h/.barn/disks/a/data",
		r.ImagesDir():                             "/h/.barn/images",
		r.EventsFile():                            "/h/.barn/events.jsonl",
	}
	for g, w := range got {
		if g != w {
			t.Errorf("got %s, want %s", g, w)
		}
	}
	for _, n := range []string{"state.json", "root.qcow2", "data.qcow2", "qemu.log"} {
		if !IsNodeFileName(n) {
			t.Errorf("IsNodeFileName(%q) = false", n)
		}
	}
	for _, n := range []string{"root.qcow2x", "x.txt", "-a.qcow2", ".state.json123"} {
		if IsNodeFileName(n) {
			t.Errorf("IsNodeFileName(%q) = true", n)
		}
	}
}

func TestEnsureNodeRuntime(t *testing.T) {
	r := testRoot(t)
	rt, err := r.EnsureNodeRuntime("pg-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{r.RuntimeDir, rt.Directory} {
		fi, err := os.Lstat(d)
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v %v", d, fi, err)
		}
	}
	// A runtime directory replaced by a symlink is refused.
	if err := os.RemoveAll(rt.Directory); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), rt.Directory); err != nil {
		t.Fatal(err)
	}
	_, err = r.EnsureNodeRuntime("pg-1")
	wantClass(t, err, exitcode.Integrity, "symlink")
}

// TestRootProblemsDoNotPointAtVerify: when the state root itself is
// unusable, `barn-state verify` fails with the same error, so the next:
// hint must not send the user there (a loop). A root that is a file gets
// no hint; a hint that exists must name another action.
func TestRootProblemsDoNotPointAtVerify(t *testing.T) {
	home := t.TempDir()
	readable := filepath.Join(home, "readable")
	if err := os.Mkdir(readable, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(readable, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(home, "file")
	writeRaw(t, file, "x", 0o600)
	dirs := []string{file}
	if os.Geteuid() == 0 {
		foreign := filepath.Join(home, "foreign")
		if err := os.Mkdir(foreign, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(foreign, 4242, 4242); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, foreign)
	}
	for _, dir := range dirs {
		_, err := Inspect(envOf(map[string]string{"HOME": home, "BARN_HOME": dir}))
		e := exitcode.As(err)
		if e == nil || e.Class != exitcode.Integrity {
			t.Fatalf("%s: err = %v, want integrity", dir, err)
		}
		if e.Next == "barn-state verify" {
			t.Errorf("%s: next = %q: verify fails the same way on an unusable root", dir, e.Next)
		}
	}
}
