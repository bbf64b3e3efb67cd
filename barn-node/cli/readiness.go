package cli

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/guest"
	"barn.dev/lib/lifecycle"
	"barn.dev/lib/sshkeys"
	"barn.dev/lib/state"
	"barn.dev/lib/tool"
)

// readinessTimeout bounds one node's guest readiness wait unless
// BARN_READY_TIMEOUT sets another (a loaded host booting under TCG may
// need more: firmware, kernel and cloud-init all run emulated).
const readinessTimeout = 10 * time.Minute

// readiness binds guest.WaitReady: SSH over the management forward with the
// deployment key until the guest's ready marker matches this generation
// and node hash.
func readiness(env *tool.Env, m *lifecycle.Manager) lifecycle.Readiness {
	timeout, _ := durationEnv(env, envReadyTimeout, readinessTimeout) // refused by manager when bad
	return &guestReadiness{root: m.Root, timeout: timeout}
}

type guestReadiness struct {
	root    *state.Root
	timeout time.Duration
}

func (g *guestReadiness) WaitReady(ctx context.Context, n *state.Node) ([]lifecycle.Warning, []string, error) {
	d, err := g.root.ReadDeployment()
	if err != nil {
		return nil, nil, err
	}
	if d == nil {
		return nil, nil, exitcode.New(exitcode.Conflict, "no deployment is applied; cannot check readiness of %s", n.Node)
	}
	t := guest.Target{Node: n.Node, Port: n.SSHPort, User: d.Spec.Deployment.User.Name,
		Keys: sshkeys.Paths(g.root.KeysDir()), VMUUID: n.VMUUID, Generation: n.Generation, SpecHash: n.ReadyHash()}
	r, err := guest.WaitReady(ctx, t, g.timeout)
	warnings := make([]lifecycle.Warning, 0, len(r.Warnings))
	for _, w := range r.Warnings {
		warnings = append(warnings, lifecycle.Warning{Stage: w.Stage, Detail: w.Detail})
	}
	return warnings, r.Repairs, err
}

// rootProbe binds lifecycle.RootProbe: rootProbeScript in the guest over
// the management SSH connection, as barn-node exec runs it.
type rootProbe struct{ root *state.Root }

// rootProbeScript reports the guest's root filesystem (findmnt) and the
// block device under it (lsblk, and sysfs for a partition's place on its
// disk and a serial lsblk lacks; nothing needs root) as key=value words
// that parseRootProbe reads (lsblk -r escapes blanks in a serial; a sysfs
// serial's blanks become underscores). The device is found by the root's
// MAJ:MIN among /sys/class/block/*/dev, not by findmnt's SOURCE, which is
// /dev/root when the kernel mounted the root itself. A root no block
// device holds (btrfs, overlay) stops after the first line.
const rootProbeScript = `set -- $(findmnt -bnr -o SOURCE,FSTYPE,SIZE /)
echo "source=$1 fstype=$2 fs_bytes=$3"
b=/sys/class/block mm=$(findmnt -nr -o MAJ:MIN /) k=
for f in $b/*/dev; do [ "$(cat "$f" 2>/dev/null)" != "$mm" ] || { k=${f%/dev}; k=${k##*/}; }; done
[ -n "$k" ] || exit 0
set -- $(lsblk -ndro KNAME,TYPE,PKNAME "/dev/$k" 2>/dev/null)
[ -n "$1" ] || exit 0
k=$1 d=$1 s=0 last=yes
[ "$2" != part ] || { d=$3; s=$(cat $b/$k/start); }
for f in $b/$d/$d*/start; do [ ! -e "$f" ] || [ "$(cat "$f")" -le "$s" ] || last=no; done
r=$(lsblk -ndro SERIAL /dev/$d 2>/dev/null)
[ -n "$r" ] || r=$(tr -s ' \t' '__' < $b/$d/serial 2>/dev/null)
echo "type=$2 disk=$d serial=$r start=$((s * 512)) bytes=$(($(cat $b/$k/size) * 512)) last=$last"
`

func (g *rootProbe) RootFS(ctx context.Context, n *state.Node) (lifecycle.RootFS, error) {
	d, err := g.root.ReadDeployment()
	if err != nil {
		return lifecycle.RootFS{}, err
	}
	if d == nil {
		return lifecycle.RootFS{}, exitcode.New(exitcode.Conflict, "no deployment is applied; cannot read the root filesystem of %s", n.Node).WithReason("no_deployment")
	}
	t := guest.Target{Node: n.Node, Port: n.SSHPort, User: d.Spec.Deployment.User.Name,
		Keys: sshkeys.Paths(g.root.KeysDir()), VMUUID: n.VMUUID, Generation: n.Generation, SpecHash: n.ReadyHash()}
	argv, err := guest.ExecArgv(t, []string{"sh", "-c", rootProbeScript})
	if err != nil {
		return lifecycle.RootFS{}, err
	}
	var out, errOut bytes.Buffer
	code, err := guest.Run(ctx, argv, guest.Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
	if err != nil {
		return lifecycle.RootFS{}, err
	}
	fs, perr := parseRootProbe(out.String())
	if code != 0 || perr != nil {
		return lifecycle.RootFS{}, exitcode.New(exitcode.Runtime, "%s: reading the root filesystem (findmnt, lsblk) failed: exit %d, output %q, %s", n.Node, code, out.String(), strings.TrimSpace(errOut.String())).
			WithReason("guest_probe_failed").WithNext("barn-node exec " + n.Node + " -- findmnt /")
	}
	return fs, nil
}

// parseRootProbe reads rootProbeScript's output: source, fstype and a
// numeric fs_bytes are required; the device words (type, disk, serial,
// start, bytes, last) are absent when lsblk did not know the source.
func parseRootProbe(out string) (lifecycle.RootFS, error) {
	kv := map[string]string{}
	for _, w := range strings.Fields(out) {
		k, v, ok := strings.Cut(w, "=")
		if !ok {
			return lifecycle.RootFS{}, fmt.Errorf("unexpected word %q", w)
		}
		kv[k] = v
	}
	num := func(k string) int64 {
		v, err := strconv.ParseInt(kv[k], 10, 64)
		if err != nil {
			return -1
		}
		return v
	}
	fs := lifecycle.RootFS{Source: kv["source"], FSType: kv["fstype"], SizeBytes: num("fs_bytes"), DevType: kv["type"],
		Disk: kv["disk"], DiskSerial: kv["serial"], PartStart: num("start"), PartBytes: num("bytes"), Last: kv["last"] == "yes"}
	if fs.Source == "" || fs.FSType == "" || fs.SizeBytes < 0 {
		return lifecycle.RootFS{}, fmt.Errorf("no root filesystem in %q", out)
	}
	if fs.DevType != "" && (fs.PartStart < 0 || fs.PartBytes < 0) {
		return lifecycle.RootFS{}, fmt.Errorf("no device geometry in %q", out)
	}
	return fs, nil
}
