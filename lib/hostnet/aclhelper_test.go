package hostnet

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// aclCase is one bridge.conf with the include files it may reference
// (paths relative to the case directory; bridge.conf names them with
// "@/" for the directory's absolute path, "@rel/" for a path relative to
// the helper's working directory).
type aclCase struct {
	name  string
	conf  string
	files map[string]string
	modes map[string]os.FileMode // default 0644
}

const aclBridge = "bw12"

// curatedACLs are the cases that once differed between Barn and the
// helper, and the corners of its parser.
func curatedACLs() []aclCase {
	long := strings.Repeat("x", 5000)
	return []aclCase{
		{name: "empty", conf: ""},
		{name: "allow", conf: "allow bw12\n"},
		{name: "allow no newline", conf: "allow bw12"},
		{name: "allow all", conf: "allow all\n"},
		{name: "deny wins", conf: "allow all\ndeny bw12\n"},
		{name: "deny all", conf: "allow bw12\ndeny all\n"},
		{name: "other bridge", conf: "allow br7\n"},
		{name: "one word", conf: "allow bw12\nallow\n"},
		{name: "one word then space", conf: "allow \n"},
		{name: "unknown command", conf: "permit bw12\n"},
		{name: "upper case", conf: "ALLOW bw12\n"},
		{name: "16-byte name", conf: "allow abcdefghijklmnop\n"},
		{name: "15-byte name", conf: "allow abcdefghijklmno\nallow bw12\n"},
		{name: "trailing comment", conf: "allow bw12 # lab\n"},
		{name: "trailing long comment", conf: "allow bw12 # the lab bridge\n"},
		{name: "comment after whitespace", conf: "   # note\n\tallow bw12\n"},
		{name: "tab separator", conf: "allow\tbw12\n"},
		{name: "tab then space", conf: "allow\tbw12 x\n"},
		{name: "many spaces", conf: "allow     bw12   \n"},
		{name: "crlf", conf: "allow bw12\r\n"},
		{name: "vertical tab is no whitespace", conf: "\vallow bw12\n"},
		{name: "form feed is whitespace", conf: "\fallow bw12\f\n"},
		{name: "trailing vertical tab", conf: "allow bw12\v\n"},
		{name: "nul ends the line", conf: "allow bw12\x00junk here\n"},
		{name: "long comment line", conf: "#" + long + "\nallow bw12\n"},
		{name: "long comment with a space", conf: "#" + strings.Repeat("y", 4094) + "allow bw12\n"},
		{name: "barn block", conf: "# existing\n" + ManagedBlock(aclBridge, "/var/lib/barn/network.json")},
		{name: "missing include", conf: "include @/nope\nallow bw12\n"},
		{name: "include allows", conf: "include @/a\n", files: map[string]string{"a": "allow bw12\n"}},
		{name: "include denies", conf: "allow bw12\ninclude @/a\n", files: map[string]string{"a": "deny bw12\n"}},
		{name: "include refused line keeps earlier rules", conf: "include @/a\n", files: map[string]string{"a": "allow bw12\nbogus\nallow all\n"}},
		{name: "include refused line drops later rules", conf: "include @/a\n", files: map[string]string{"a": "bogus\nallow bw12\n"}},
		{name: "nested include", conf: "include @/a\n", files: map[string]string{"a": "include @/b\n", "b": "allow bw12\n"}},
		{name: "include of a directory", conf: "include @/d\nallow bw12\n", files: map[string]string{"d/x": "deny all\n"}},
		{name: "long include path", conf: "include @/" + strings.Repeat("p", 40) + "\n", files: map[string]string{strings.Repeat("p", 40): "allow bw12\n"}},
		{name: "relative include", conf: "include @rel/r\n", files: map[string]string{"r": "allow bw12\n"}},
		{name: "unreadable include", conf: "include @/a\nallow all\n", files: map[string]string{"a": "deny bw12\n"}, modes: map[string]os.FileMode{"a": 0o600}},
		{name: "unreadable include only allow", conf: "include @/a\n", files: map[string]string{"a": "allow bw12\n"}, modes: map[string]os.FileMode{"a": 0o600}},
		{name: "unreadable bridge.conf", conf: "allow bw12\n", modes: map[string]os.FileMode{"bridge.conf": 0o600}},
		{name: "include cycle", conf: "include @/a\n", files: map[string]string{"a": "allow bw12\ninclude @/b\n", "b": "include @/a\n"}},
	}
}

// randomACLs are n generated files from a grammar of valid, odd and
// refused lines, with includes (deterministic: seed 12).
func randomACLs(n int) []aclCase {
	rng := rand.New(rand.NewSource(12))
	names := []string{"bw12", "all", "br7", "bw1", "bw12x", "abcdefghijklmnop", "abcdefghijklmno", ""}
	seps := []string{" ", "\t", "  ", " \t", "\t "}
	pick := func(a []string) string { return a[rng.Intn(len(a))] }
	line := func(depthOK bool) string {
		lead := pick([]string{"", "", "", " ", "\t", "  "})
		trail := pick([]string{"", "", "", " ", "\t", "\r", " # c", "#"})
		switch r := rng.Intn(20); {
		case r < 6:
			return lead + "allow" + pick(seps) + pick(names) + trail
		case r < 9:
			return lead + "deny" + pick(seps) + pick(names) + trail
		case r < 11:
			return lead + "# " + pick(names)
		case r < 12:
			return lead
		case r < 13:
			return lead + pick([]string{"allow", "deny", "include", "Allow", "permit", "#allow"})
		case r < 14:
			return lead + pick([]string{"permit", "Allow", "DENY", "allowed"}) + pick(seps) + pick(names)
		case r < 16 && depthOK:
			return lead + "include" + pick(seps) + "@/" + pick([]string{"i1", "i2", "missing", "ro"}) + trail
		default:
			return lead + "allow" + pick(seps) + "bw12" + trail
		}
	}
	file := func(depthOK bool) string {
		var b strings.Builder
		for i := rng.Intn(5); i >= 0; i-- {
			b.WriteString(line(depthOK) + "\n")
		}
		return b.String()
	}
	var out []aclCase
	for i := 0; i < n; i++ {
		c := aclCase{name: fmt.Sprintf("random-%d", i), conf: file(true),
			files: map[string]string{"i1": file(false), "i2": file(false), "ro": file(false)},
			modes: map[string]os.FileMode{"ro": 0o600}}
		out = append(out, c)
	}
	return out
}

// TestLiveACLReaderMatchesHelper is the differential test of Barn's
// bridge.conf reader against the real qemu-bridge-helper: each of the
// curated and generated files is installed as /etc/qemu/bridge.conf (in
// this namespace's private /etc overlay) and the helper runs as QEMU runs
// it (--use-vnet --br=NAME --fd=N on a socketpair), as root and as an
// unprivileged user. Barn's preflight must report an error finding for
// exactly the files the helper refuses ("failed to parse default acl
// file"), bridge_not_allowed for exactly those it denies ("access denied
// by acl file"), and no ACL finding when the helper goes past the ACL.
func TestLiveACLReaderMatchesHelper(t *testing.T) {
	live(t, func(t *testing.T, e *liveEnv) {
		sh(t, "ip", "link", "add", aclBridge, "type", "bridge")
		sh(t, "ip", "link", "set", aclBridge, "up")
		must(t, os.MkdirAll("/etc/qemu", 0o755))
		cases := append(curatedACLs(), randomACLs(250)...)
		counts := map[string]int{}
		for i, c := range cases {
			dir := filepath.Join(e.dir, fmt.Sprintf("case%d", i))
			cwd := filepath.Join(e.dir, fmt.Sprintf("cwd%d", i))
			must(t, os.MkdirAll(dir, 0o755))
			must(t, os.MkdirAll(cwd, 0o755))
			expand := strings.NewReplacer("@/", dir+"/", "@rel/", filepath.Base(dir)+"/")
			for name, body := range c.files {
				p := filepath.Join(dir, name)
				must(t, os.MkdirAll(filepath.Dir(p), 0o755))
				must(t, os.WriteFile(p, []byte(expand.Replace(body)), 0o644))
			}
			must(t, os.Remove(cwd)) // relative includes resolve from e.dir's case dir
			cwd = e.dir
			conf := "/etc/qemu/bridge.conf"
			_ = os.Remove(conf)
			must(t, os.WriteFile(conf, []byte(expand.Replace(c.conf)), 0o644))
			for name, m := range c.modes {
				p := filepath.Join(dir, name)
				if name == "bridge.conf" {
					p = conf
				}
				must(t, os.Chmod(p, m))
			}
			for _, uid := range []int{0, 65534} {
				helper := runHelper(t, e.host.Helper, cwd, uid)
				barn := barnACLVerdict(t, cwd, uid)
				counts[fmt.Sprintf("uid %d %s", uid, helper)]++
				if helper != barn {
					t.Errorf("case %q as uid %d: the helper says %s, Barn says %s\nbridge.conf:\n%s\nincludes: %q", c.name, uid, helper, barn, expand.Replace(c.conf), c.files)
				}
			}
		}
		t.Logf("verdicts: %v", counts)
		for _, v := range []string{"refused", "denied", "allowed"} {
			for _, uid := range []int{0, 65534} {
				if counts[fmt.Sprintf("uid %d %s", uid, v)] < 5 {
					t.Errorf("too few %s cases as uid %d: %v", v, uid, counts)
				}
			}
		}
	})
}

// runHelper runs the real helper as QEMU's net/tap.c does (a socketpair
// end as --fd, --use-vnet, --br) as uid, in cwd, and classifies its
// answer: refused (it could not parse bridge.conf), denied (the ACL
// denies the bridge) or allowed (it went past the ACL: as root it attaches
// a tap, unprivileged it then fails to create one).
func runHelper(t *testing.T, helper, cwd string, uid int) string {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	must(t, err)
	ours, theirs := os.NewFile(uintptr(fds[0]), "ours"), os.NewFile(uintptr(fds[1]), "theirs")
	defer ours.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, helper, "--use-vnet", "--br="+aclBridge, "--fd=3")
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.Dir = cwd
	if uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}}
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	theirs.Close()
	msg := stderr.String()
	switch {
	case strings.Contains(msg, "failed to parse default acl file"):
		return "refused"
	case strings.Contains(msg, "access denied by acl file"):
		return "denied"
	case ctx.Err() != nil:
		t.Fatalf("the helper hung: %s", msg)
	case cmd.ProcessState != nil && cmd.ProcessState.Sys().(syscall.WaitStatus).Signaled():
		return "refused" // it crashed before attaching (an include cycle)
	case err != nil && uid == 0:
		t.Fatalf("the helper (root) failed past the ACL: %v: %s", err, msg)
	case err != nil && !strings.Contains(msg, "failed to create tun device"):
		t.Fatalf("the helper (uid %d) failed oddly: %v: %s", uid, err, msg)
	}
	return "allowed"
}

// barnACLVerdict is what Barn's preflight says about the ACL for uid:
// refused (an error finding about bridge.conf), denied
// (bridge_not_allowed) or allowed (no ACL error).
func barnACLVerdict(t *testing.T, cwd string, uid int) string {
	t.Helper()
	h := FromEnv(nil)
	h.UID = uid
	wd, _ := os.Getwd()
	must(t, os.Chdir(cwd))
	defer os.Chdir(wd)
	verdict := "allowed"
	h.checkACL(aclBridge, func(code, sev, fix, format string, args ...any) {
		if sev != SevError {
			return
		}
		switch code {
		case FindBridgeConfMissing, FindBridgeConfBad, FindBridgeConfInvalid:
			verdict = "refused"
		case FindBridgeNotAllowed:
			verdict = "denied"
		default:
			t.Fatalf("unexpected ACL finding %s", code)
		}
	})
	return verdict
}
