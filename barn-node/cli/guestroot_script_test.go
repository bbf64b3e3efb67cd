package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"

	"barn.dev/lib/cidata"
	"barn.dev/lib/qemu"
	"barn.dev/lib/sshkeys"
	"barn.dev/lib/state"
	"barn.dev/lib/testexec"
)

// fakeSSH answers barn-node's ssh commands without a server: it takes the
// node's guest directory from HostKeyAlias (hosts/ALIAS, linked by
// guestroot) and runs the remote command, the last argument, with the
// guest's state directory and /sys/class/block replaced by that
// directory's and its bin first on PATH — what `sshd -guest` does, but
// on no port, so it keeps answering when a start moves the node's
// management port.
const fakeSSH = `#!/bin/sh
h= cmd=
for a; do case $a in HostKeyAlias=*) h=${a#HostKeyAlias=};; esac; cmd=$a; done
g=$(dirname "$0")/hosts/$h
[ -d "$g" ] || { echo "fake ssh: no guest for $h" >&2; exit 255; }
g=$(cd "$g" && pwd -P)
PATH=$g/bin:$PATH exec sh -c "$(printf '%s' "$cmd" | sed "s|` + cidata.StateDir + `/|$g/|g; s|/sys/class/block|$g/sys|g")"
`

// guestRoot is the fake guest's root layout for guestroot.
type guestRoot struct {
	fs, devType, serial string
	notLast             bool
	mib                 int64 // the disk size the root partition and filesystem fill
}

// cmdGuestRoot is `guestroot NODE [-fs=FSTYPE] [-type=part|lvm|...]
// [-serial=S] [-notlast] [-mib=N]`: make NODE's fake guest answer the
// root filesystem probe (and readiness, with guestready) through the fake
// ssh first on PATH (fakeSSH, installed under $WORK/.fakessh). Its root
// is an FSTYPE (ext4) filesystem on partition vda1 of the disk with
// serial S (qemu.RootDiskSerial), starting at 1 MiB and filling a disk of
// N MiB (the node's committed root disk) with 1 MiB to spare; -type=lvm
// puts it on a logical volume of the same size, -notlast adds a
// partition vda2 after it. A guest that did not grow its root is one
// filling the old size. Every call replaces the last.
func cmdGuestRoot(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: guestroot NODE [-fs=FSTYPE] [-type=TYPE] [-serial=S] [-notlast] [-mib=N]")
	}
	root, err := state.Open(ts.Getenv)
	ts.Check(err)
	n, err := root.ReadNode(args[0])
	ts.Check(err)
	if n == nil {
		ts.Fatalf("guestroot: no committed node %s", args[0])
	}
	g := guestRoot{fs: "ext4", devType: "part", serial: qemu.RootDiskSerial, mib: n.Spec.RootDiskBytes >> 20}
	for _, a := range args[1:] {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "-fs":
			g.fs = v
		case "-type":
			g.devType = v
		case "-serial":
			g.serial = v
		case "-notlast":
			g.notLast = true
		case "-mib":
			g.mib, err = strconv.ParseInt(v, 10, 64)
			ts.Check(err)
		default:
			ts.Fatalf("guestroot: unknown flag %s", a)
		}
	}
	dir := ts.MkAbs(filepath.Join("guest", args[0]))
	ts.Check(os.RemoveAll(filepath.Join(dir, "sys")))
	for path, body := range g.files() {
		p := filepath.Join(dir, path)
		ts.Check(os.MkdirAll(filepath.Dir(p), 0o755))
		ts.Check(testexec.WriteScript(p, []byte(body)))
	}
	installFakeSSH(ts, sshkeys.HostKeyAlias(n.VMUUID), dir)
}

// files are the fake guest's findmnt, lsblk and sysfs, by path under its
// directory.
func (g guestRoot) files() map[string]string {
	const sector = 512
	start, size := int64(1<<20), g.mib<<20-2<<20
	src, kname, parent := "/dev/vda1", "vda1", "vda"
	if g.devType != "part" {
		src, kname, parent = "/dev/mapper/vg-root", "dm-0", "vda3"
	}
	f := map[string]string{
		"bin/findmnt": fmt.Sprintf("#!/bin/sh\ncase \"$*\" in *MAJ:MIN*) echo 254:1 ;; *) echo '%s %s %d' ;; esac\n", src, g.fs, size-(4<<20)),
		"bin/lsblk": fmt.Sprintf("#!/bin/sh\ncase \"$2 $3\" in\n'KNAME,TYPE,PKNAME /dev/%s') echo '%s %s %s' ;;\n'SERIAL /dev/vda') echo '%s' ;;\n*) echo \"fake lsblk: $*\" >&2; exit 1 ;;\nesac\n",
			kname, kname, g.devType, parent, g.serial),
		"sys/" + kname + "/size": fmt.Sprintf("%d\n", size/sector),
		"sys/" + kname + "/dev":  "254:1\n",
	}
	if g.devType == "part" {
		f["sys/vda1/start"] = fmt.Sprintf("%d\n", start/sector)
		f["sys/vda/vda1/start"] = f["sys/vda1/start"]
	}
	if g.notLast {
		f["sys/vda/vda2/start"] = fmt.Sprintf("%d\n", (start+size)/sector)
	}
	return f
}

// installFakeSSH puts fakeSSH first on the script's PATH (once) and links
// hosts/ALIAS to the guest directory dir.
func installFakeSSH(ts *testscript.TestScript, alias, dir string) {
	bin := ts.MkAbs(".fakessh")
	hosts := filepath.Join(bin, "hosts")
	ts.Check(os.MkdirAll(hosts, 0o755))
	if _, err := os.Stat(filepath.Join(bin, "ssh")); err != nil {
		ts.Check(testexec.WriteScript(filepath.Join(bin, "ssh"), []byte(fakeSSH)))
		ts.Setenv("PATH", bin+string(os.PathListSeparator)+ts.Getenv("PATH"))
	}
	link := filepath.Join(hosts, alias)
	_ = os.Remove(link)
	ts.Check(os.Symlink(dir, link))
}
