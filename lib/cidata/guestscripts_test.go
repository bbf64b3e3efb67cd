package cidata

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"barn.dev/lib/spec"
	"barn.dev/lib/testexec"
)

// fakeGuest runs one guest helper under bash with fake system commands:
// PATH holds only the fakes below and links to a few harmless utilities,
// so no real mount, mkfs, blkid or fsck can ever run on the host. Each fake
// appends "name args…" to the log.
type fakeGuest struct {
	t                 *testing.T
	dir, log, fstab   string
	env               []string
	stdout, stderr    string
	code              int
	device, deviceDir string
}

const fakePrelude = "#!/bin/bash\necho \"${0##*/} $*\" >>\"$FAKE_LOG\"\n"

// fakeCommands: behaviour switches are FAKE_* variables.
var fakeCommands = map[string]string{
	// FAKE_BLKID: comma-separated answers to successive TYPE probes; a
	// number is an exit status, a word a filesystem type (exit 0). UUID
	// queries answer FAKE_UUID.
	"blkid": `case "$*" in *"-s UUID"*) echo "${FAKE_UUID:-}"; exit 0 ;; esac
n=$(cat "$FAKE_LOG.blkid" 2>/dev/null || echo 0); echo $((n + 1)) >"$FAKE_LOG.blkid"
IFS=, read -r -a a <<<"$FAKE_BLKID"; v=${a[$n]:-${a[-1]}}
case "$v" in [0-9]*) exit "$v" ;; *) echo "$v"; exit 0 ;; esac`,
	"mount":       `[ "${FAKE_MOUNT:-ok}" = ok ] || { echo "mount: wrong fs type" >&2; exit 32; }`,
	"mkfs.xfs":    `exit 0`,
	"mkfs.ext4":   `exit 0`,
	"xfs_repair":  `printf '%s\n' "${FAKE_FSCK_OUT:-}"; exit "${FAKE_FSCK:-0}"`,
	"e2fsck":      `printf '%s\n' "${FAKE_FSCK_OUT:-}"; exit "${FAKE_FSCK:-0}"`,
	"lsblk":       `echo disk`,
	"blockdev":    `echo 0`,
	"findmnt":     `exit 1`,
	"mountpoint":  `exit 1`,
	"udevadm":     `exit 0`,
	"sleep":       `exit 0`,
	"modprobe":    `exit 0`,
	"umount":      `exit 0`,
	"barn-status": `exit 0`,
	// FAKE_PASSWD and FAKE_GROUP are getent's passwd and group lines.
	"getent":   `case "$1" in passwd) [ -n "${FAKE_PASSWD:-}" ] && echo "$FAKE_PASSWD" ;; group) [ -n "${FAKE_GROUP:-}" ] && echo "$FAKE_GROUP" ;; *) false ;; esac`,
	"hostname": `echo "${FAKE_HOSTNAME:-}"`,
}

// harmless are the host utilities the scripts may use for real.
var harmless = []string{"awk", "cat", "chmod", "cut", "dirname", "grep", "head", "mkdir", "mktemp", "mv", "readlink", "rm", "sed", "seq", "tail", "timeout"}

func newFakeGuest(t *testing.T) *fakeGuest {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range fakeCommands {
		if err := testexec.WriteScript(filepath.Join(bin, name), []byte(fakePrelude+body+"\n")); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range harmless {
		p, err := exec.LookPath(u)
		if err != nil {
			t.Fatalf("host utility %s: %v", u, err)
		}
		if err := os.Symlink(p, filepath.Join(bin, u)); err != nil {
			t.Fatal(err)
		}
	}
	g := &fakeGuest{t: t, dir: dir, log: filepath.Join(dir, "log"), fstab: filepath.Join(dir, "fstab")}
	if err := os.WriteFile(g.fstab, []byte("/dev/vda1 / ext4 defaults 0 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g.env = []string{"PATH=" + bin, "FAKE_LOG=" + g.log, "BARN_FSTAB=" + g.fstab, "BARN_STATUS=" + filepath.Join(bin, "barn-status"), "LC_ALL=C"}
	return g
}

// blockDevice gives the disk a by-id link to a block device node (the
// script tests -b); the fakes never open it.
func (g *fakeGuest) blockDevice(serial string) {
	g.t.Helper()
	byid := filepath.Join(g.dir, "by-id")
	if err := os.Mkdir(byid, 0o755); err != nil {
		g.t.Fatal(err)
	}
	var dev string
	for _, pat := range []string{"/dev/loop[0-9]*", "/dev/vd[a-z]", "/dev/sd[a-z]", "/dev/nvme[0-9]n[0-9]", "/dev/zram[0-9]", "/dev/ram[0-9]*"} {
		m, _ := filepath.Glob(pat)
		for _, p := range m {
			if fi, err := os.Stat(p); err == nil && fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0 {
				dev = p
				break
			}
		}
		if dev != "" {
			break
		}
	}
	if dev == "" {
		g.t.Skip("no block device node on this host to stand in for the data disk (the script tests -b)")
	}
	if err := os.Symlink(dev, filepath.Join(byid, "virtio-"+serial)); err != nil {
		g.t.Fatal(err)
	}
	g.device, g.deviceDir = dev, byid
	g.env = append(g.env, "BARN_DISK_BY_ID="+byid)
}

func (g *fakeGuest) run(script string, env ...string) {
	g.t.Helper()
	body, err := Script(script)
	if err != nil {
		g.t.Fatal(err)
	}
	p := filepath.Join(g.dir, script)
	if err := testexec.WriteScript(p, body); err != nil {
		g.t.Fatal(err)
	}
	cmd := exec.Command("/bin/bash", p)
	cmd.Env = append(append([]string{}, g.env...), env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	g.stdout, g.stderr, g.code = out.String(), errb.String(), 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		g.code = ee.ExitCode()
	} else if err != nil {
		g.t.Fatal(err)
	}
}

func (g *fakeGuest) calls() string {
	b, _ := os.ReadFile(g.log)
	return string(b)
}

func (g *fakeGuest) fstabText() string {
	b, _ := os.ReadFile(g.fstab)
	return string(b)
}

func (g *fakeGuest) disk(name, serial, fs string) {
	g.t.Helper()
	mnt := filepath.Join(g.dir, "mnt", name)
	p := filepath.Join(g.dir, "disks")
	if err := os.WriteFile(p, []byte(name+" "+serial+" "+mnt+" "+fs+"\n"), 0o644); err != nil {
		g.t.Fatal(err)
	}
	g.env = append(g.env, "BARN_DISKS="+p)
}

const testSerial = "abcdefghijklmnopqrst"

// A data disk that fails to probe is never formatted: every probe error
// (blkid exit status other than 0 and 2), also after blank answers, ends
// the disk with a warning line and exit 1, and neither mkfs nor mount nor
// fstab is touched.
func TestInitDisksProbeErrorNeverFormats(t *testing.T) {
	for name, blkid := range map[string]string{
		"probe error":              "4",
		"other probe error":        "8",
		"error after blank probes": "2,2,4",
	} {
		t.Run(name, func(t *testing.T) {
			g := newFakeGuest(t)
			g.blockDevice(testSerial)
			g.disk("data", testSerial, "auto")
			before := g.fstabText()
			g.run("barn-init-disks", "FAKE_BLKID="+blkid)
			calls := g.calls()
			if g.code != 1 {
				t.Fatalf("exit %d, want 1\nstderr: %s\ncalls:\n%s", g.code, g.stderr, calls)
			}
			code := blkid[strings.LastIndex(blkid, ",")+1:]
			want := "data: probe error on " + g.device + " (blkid exit status " + code + "); not formatted"
			if lines := strings.Split(strings.TrimSpace(g.stderr), "\n"); lines[len(lines)-1] != want {
				t.Fatalf("warning line = %q, want %q", g.stderr, want)
			}
			for _, forbidden := range []string{"mkfs.", "mount ", "barn-status disk", "barn-status repair", "xfs_repair", "e2fsck"} {
				if strings.Contains(calls, forbidden) {
					t.Fatalf("%q ran after a probe error:\n%s", forbidden, calls)
				}
			}
			if !strings.Contains(calls, "blkid -p -o value -s TYPE "+g.device) {
				t.Fatalf("blkid never probed the device:\n%s", calls)
			}
			if g.fstabText() != before {
				t.Fatalf("fstab changed:\n%s", g.fstabText())
			}
		})
	}
}

// A filesystem that does not mount but whose read-only check does not
// confirm damage (or fails with an I/O error) is not formatted either.
func TestInitDisksUnconfirmedDamageNeverFormats(t *testing.T) {
	for name, env := range map[string][]string{
		"check finds nothing":      {"FAKE_FSCK=0"},
		"check fails with I/O err": {"FAKE_FSCK=1", "FAKE_FSCK_OUT=xfs_repair: read failed: Input/output error"},
	} {
		t.Run(name, func(t *testing.T) {
			g := newFakeGuest(t)
			g.blockDevice(testSerial)
			g.disk("data", testSerial, "auto")
			g.run("barn-init-disks", append([]string{"FAKE_BLKID=xfs", "FAKE_MOUNT=fail"}, env...)...)
			calls := g.calls()
			if g.code != 1 || !strings.HasSuffix(strings.TrimSpace(g.stderr), "data: xfs on "+g.device+" does not mount and is not confirmed damaged; not formatted") {
				t.Fatalf("exit %d stderr %q\ncalls:\n%s", g.code, g.stderr, calls)
			}
			if strings.Contains(calls, "mkfs.") || !strings.Contains(calls, "xfs_repair -n "+g.device) {
				t.Fatalf("calls:\n%s", calls)
			}
		})
	}
}

// The controls: the same harness sees mkfs run for a blank disk (three
// "no signature" probes) and for confirmed damage (reported as a repair),
// so the assertions above can fail.
func TestInitDisksFormatsBlankAndResetsConfirmedDamage(t *testing.T) {
	g := newFakeGuest(t)
	g.blockDevice(testSerial)
	g.disk("data", testSerial, "auto")
	g.run("barn-init-disks", "FAKE_BLKID=2", "FAKE_UUID=1234-abcd")
	calls := g.calls()
	if g.code != 0 || !strings.Contains(calls, "mkfs.xfs -f -q "+g.device) || !strings.Contains(calls, "barn-status disk data "+filepath.Join(g.dir, "mnt", "data")+" xfs") {
		t.Fatalf("blank disk: exit %d stderr %q\ncalls:\n%s", g.code, g.stderr, calls)
	}
	if strings.Count(calls, "blkid -p -o value -s TYPE") != 3 {
		t.Fatalf("blank needs three probes:\n%s", calls)
	}
	if !strings.Contains(g.fstabText(), "# barn-disk: data\nUUID=1234-abcd "+filepath.Join(g.dir, "mnt", "data")+" xfs defaults,nofail,x-systemd.device-timeout=10min 0 2\n") {
		t.Fatalf("fstab:\n%s", g.fstabText())
	}

	g = newFakeGuest(t)
	g.blockDevice(testSerial)
	g.disk("data", testSerial, "ext4")
	g.run("barn-init-disks", "FAKE_BLKID=ext4", "FAKE_MOUNT=fail", "FAKE_FSCK=4", "FAKE_UUID=1234-abcd")
	calls = g.calls()
	// The mount after mkfs fails too (FAKE_MOUNT=fail), but the reset ran.
	if !strings.Contains(calls, "e2fsck -fn "+g.device) || !strings.Contains(calls, "mkfs.ext4 -F -q "+g.device) {
		t.Fatalf("confirmed damage: exit %d stderr %q\ncalls:\n%s", g.code, g.stderr, calls)
	}
}

// rootProbeBlocker is the fake mount for root: a writable 9p mount puts a
// directory where the script's write probe (".barn-write-probe.<script
// pid>") will be created, so the probe fails as on a share the guest
// cannot write. The script's pid is mount's parent or grandparent
// (command substitution may fork a subshell).
const rootProbeBlocker = `if [ "$2" = 9p ]; then case "$4" in *,ro) ;; *)
	for p in $PPID $(awk '{print $4}' /proc/$PPID/stat); do mkdir -p "$6/.barn-write-probe.$p"; done ;; esac; fi
exit 0`

// Shares mount read-only unless the mode is exactly "rw"; a writable share
// the guest cannot write is remounted read-only with a warning and its
// fstab row says ro.
func TestInitSharesReadOnlyDefaultAndFallback(t *testing.T) {
	g := newFakeGuest(t)
	ro, rw, odd := filepath.Join(g.dir, "ro"), filepath.Join(g.dir, "rw"), filepath.Join(g.dir, "odd")
	table := "barn-00000000000000000001 " + ro + " ro\nbarn-00000000000000000002 " + rw + " rw\nbarn-00000000000000000003 " + odd + "\n"
	p := filepath.Join(g.dir, "shares")
	if err := os.WriteFile(p, []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(rw, 0o555); err != nil { // the probe cannot create a file here
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		// root writes through mode bits: make the probe fail another way
		if err := os.Chmod(rw, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := testexec.WriteScript(filepath.Join(g.dir, "bin", "mount"), []byte(fakePrelude+rootProbeBlocker+"\n")); err != nil {
			t.Fatal(err)
		}
	}
	g.run("barn-init-shares", "BARN_SHARES="+p)
	calls := g.calls()
	const opts = "version=9p2000.L,trans=virtio,cache=none,msize=262144,access=client,nofail,nodev,nosuid"
	if g.code != 0 {
		t.Fatalf("exit %d stderr %q\ncalls:\n%s", g.code, g.stderr, calls)
	}
	for _, want := range []string{
		"mount -t 9p -o " + opts + ",ro barn-00000000000000000001 " + ro,
		"mount -t 9p -o " + opts + " barn-00000000000000000002 " + rw,
		"mount -t 9p -o " + opts + ",ro barn-00000000000000000002 " + rw,
		"barn-status warn shares " + rw + ": the writable share is not writable by the guest; mounted read-only",
		"mount -t 9p -o " + opts + ",ro barn-00000000000000000003 " + odd,
	} {
		if !strings.Contains(calls, want+"\n") {
			t.Fatalf("missing call %q:\n%s", want, calls)
		}
	}
	wantFstab := "/dev/vda1 / ext4 defaults 0 1\n# BEGIN BARN SHARES\n" +
		"barn-00000000000000000001 " + ro + " 9p " + opts + ",ro 0 0\n" +
		"barn-00000000000000000002 " + rw + " 9p " + opts + ",ro 0 0\n" +
		"barn-00000000000000000003 " + odd + " 9p " + opts + ",ro 0 0\n# END BARN SHARES\n"
	if got := g.fstabText(); got != wantFstab {
		t.Fatalf("fstab:\n%s\nwant:\n%s", got, wantFstab)
	}
}

// The identity stage checks the uid the seed hands it for any login user
// (issue 12, case 2): setup.env rendered for admin with uid 1500 makes a
// guest user with uid 1000 fail the stage naming both uids, and the right
// uid passes the uid check (the stage then stops at the home directory's
// authorized key, which this host does not have).
func TestIdentityContractChecksTheSpecUID(t *testing.T) {
	d, nodes := fixture()
	d.User = spec.User{Name: "admin", UID: 1500}
	in := Input{Deployment: d, Node: nodes[1], Peers: nodes, Generation: 1, PublicKey: testKey}
	f, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	var u struct {
		WriteFiles []struct{ Path, Content string } `yaml:"write_files"`
	}
	if err := yaml.Unmarshal(f.UserData, &u); err != nil {
		t.Fatal(err)
	}
	g := newFakeGuest(t)
	env := filepath.Join(g.dir, "setup.env")
	for _, w := range u.WriteFiles {
		if w.Path == ConfigDir+"/setup.env" {
			if err := os.WriteFile(env, []byte(w.Content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	run := func(uid string) {
		g.run("barn-identity-contract", "BARN_SETUP_ENV="+env, "FAKE_HOSTNAME=pg-test-1",
			"FAKE_PASSWD=admin:x:"+uid+":"+uid+"::/home/admin:/bin/bash")
	}
	run("1000")
	if g.code != 1 || !strings.Contains(g.stderr, "login user admin has uid 1000; want 1500") {
		t.Fatalf("uid 1000: exit %d, stderr %q", g.code, g.stderr)
	}
	run("1500")
	if g.code != 1 || strings.Contains(g.stderr, "uid") || !strings.Contains(g.stderr, "login user admin has no authorized key") {
		t.Fatalf("uid 1500: exit %d, stderr %q", g.code, g.stderr)
	}
}
