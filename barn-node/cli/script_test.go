package cli_test

import (
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	node "barn.dev/barn-node/cli"
	"barn.dev/lib/fakeqemu"
	"barn.dev/lib/imagecache"
	"barn.dev/lib/imageref"
	"barn.dev/lib/inventory"
	"barn.dev/lib/plan"
	"barn.dev/lib/scripttest"
	"barn.dev/lib/spec"
	"barn.dev/lib/state"
	"barn.dev/lib/testexec"
	"barn.dev/lib/vmrecord"
	"barn.dev/lib/wire"
)

func TestMain(m *testing.M) {
	node.CrashHook = scripttest.CrashAfter  // BARN_CRASH_AFTER exists only in test binaries
	node.FirmwareHook = scripttest.Firmware // and BARN_TEST_FIRMWARE
	node.DoctorHook = scripttest.DoctorHost // and BARN_TEST_KVM, BARN_TEST_MISSING
	testscript.Main(m, map[string]func(){
		"barn-node":         scripttest.Command(node.Main),
		fakeqemu.BinaryName: func() { os.Exit(fakeqemu.Main(os.Args[1:])) },
		// The arm64 emulator, faked the same way (arm64 deployments).
		"qemu-system-aarch64": func() { os.Exit(fakeqemu.Main(os.Args[1:])) },
	})
}

// TestScripts runs the barn-node lifecycle suites against the fake QEMU
// (BARN_QEMU=qemu-system-x86_64 resolves to the registered fake, TCG by
// explicit opt-in, no private NIC: BARN_PRIVATE_NET=none is test-only).
func TestScripts(t *testing.T) {
	// The shipped binary is built into this test's temp dir, removed once
	// every (parallel) script has finished.
	shippedOnce.dir = t.TempDir()
	scripttest.Run(t, params("testdata/script"))
}

// TestAccess runs the access suites (ssh, exec, ssh-config, logs,
// provision) against a real OpenSSH server on 127.0.0.1 standing in for
// each node's management port forward (the `sshd` command), with node state
// committed by a fake-QEMU apply. HOME is $WORK so ~/.ssh is the test's.
// It skips only when sshd or the ssh client is not installed.
func TestAccess(t *testing.T) {
	scripttest.Run(t, accessParams(t, "testdata/access"))
}

// accessParams is params(dir) with HOME=$WORK, so ~/.ssh is the test's;
// it skips t when sshd or the ssh client is not installed.
func accessParams(t *testing.T, dir string) testscript.Params {
	if sshdBinary() == "" {
		t.Skip("openssh-server (sshd) is not installed: the access suite needs a real SSH server")
	}
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("the OpenSSH client is not installed: ", err)
	}
	p := params(dir)
	setup := p.Setup
	p.Setup = func(env *testscript.Env) error {
		if err := setup(env); err != nil {
			return err
		}
		env.Setenv("HOME", env.WorkDir)
		return nil
	}
	return p
}

func params(dir string) testscript.Params {
	return scripttest.Configure(testscript.Params{
		Dir: dir,
		Cmds: map[string]func(*testscript.TestScript, bool, []string){
			"testplan":   cmdTestplan,
			"spawnsleep": cmdSpawnSleep,
			"setpid":     cmdSetPID,
			"alive":      cmdAlive,
			"killfake":   cmdKillFake,
			"waitdead":   cmdWaitDead,
			"race2":      cmdRace2,
			"listen":     cmdListen,
			"unlisten":   cmdUnlisten,
			"fdlink":     cmdFDLink,
			"argvhash":   cmdArgvHash,
			"flipbyte":   cmdFlipByte,
			"sshd":       cmdSSHD,
			"sshport":    cmdSSHPort,
			"guestready": cmdGuestReady,
			"guestroot":  cmdGuestRoot,
			"guestclock": cmdGuestClock,
			"event":      cmdEvent,
			"shipped":    cmdShipped,
			"specreach":  cmdSpecReach,
			"spawnclaim": cmdSpawnClaim,
			"killpid":    cmdKillPID,
			"holdqmp":    cmdHoldQMP,
			"noheadroom": cmdNoHeadroom,
			"releaseqmp": cmdReleaseQMP,
		},
		Setup: func(env *testscript.Env) error {
			rt, err := os.MkdirTemp("/tmp", "bn")
			if err != nil {
				return err
			}
			env.Setenv("BARN_HOME", env.WorkDir+"/.barn")
			env.Setenv("BARN_RUNTIME_DIR", rt)
			env.Setenv("BARN_QEMU", fakeqemu.BinaryName)
			env.Setenv("BARN_ACCEL", "tcg")
			env.Setenv("BARN_PRIVATE_NET", "none")
			env.Setenv("BARN_READINESS", "none")
			env.Setenv("BARN_STOP_TIMEOUT", "2s")
			env.Defer(func() { reap(rt, env.WorkDir); os.RemoveAll(rt) })
			return nil
		},
	})
}

// TestRealQEMU runs testdata/real against the real qemu-system-x86_64 under
// TCG. It skips only when QEMU is not installed.
func TestRealQEMU(t *testing.T) {
	bin, err := exec.LookPath("qemu-system-x86_64")
	if err != nil || strings.Contains(bin, "testscript") {
		if bin, err = exec.LookPath("/usr/bin/qemu-system-x86_64"); err != nil {
			t.Skip("qemu-system-x86_64 is not installed: ", err)
		}
	}
	p := params("testdata/real")
	setup := p.Setup
	p.Setup = func(env *testscript.Env) error {
		if err := setup(env); err != nil {
			return err
		}
		env.Setenv("BARN_QEMU", bin)
		return nil
	}
	scripttest.Run(t, p)
}

// reap kills every leftover test QEMU whose command line names rt (never
// anything else; found in the process table, so a script that removed the
// runtime directory leaks nothing), and any spawned sleep or claimant.
func reap(rt, work string) {
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid <= 1 || pid == os.Getpid() {
			continue
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if args := strings.Split(string(cmd), "\x00"); len(args) > 1 && strings.Contains(string(cmd), rt+"/") &&
			strings.Contains(args[0], "qemu-system-") { // the fake under either emulator's name
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for _, f := range []string{"sleep.pid", "claim.pid"} {
		if b, err := os.ReadFile(filepath.Join(work, f)); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// testImage puts a small qcow2 base into the image cache (the layout
// images/<family>/<file>) and returns its exact identity.
func testImage(home string) (imageref.Identity, error) {
	id := imageref.Identity{Selector: "t1", Image: "t1", Version: "1", Arch: "amd64", File: "images/t1-1-amd64.qcow2",
		VirtualSize: 16 << 20, Boot: "bios", SourceUser: "debian", Status: "supported"}
	p := filepath.Join(home, "images", "t1", "t1-1-amd64.qcow2")
	if _, err := os.Stat(p); err != nil {
		for _, d := range []string{home, filepath.Join(home, "images"), filepath.Dir(p)} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				return id, err
			}
			if err := os.Chmod(d, 0o700); err != nil {
				return id, err
			}
		}
		if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", p, "16M").CombinedOutput(); err != nil {
			return id, fmt.Errorf("qemu-img: %v: %s", err, out)
		}
		if err := os.Chmod(p, 0o444); err != nil { // verified cache files are read-only
			return id, err
		}
	}
	meas, err := imagecache.MeasureFile(p)
	if err != nil {
		return id, err
	}
	id.SHA256, id.SizeBytes = meas.SHA256, meas.SizeBytes
	return id, nil
}

func serial(node, disk string) string {
	sum := sha256.Sum256([]byte(node + "/" + disk))
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	var b strings.Builder
	for i := 0; i < 20; i++ {
		b.WriteByte(alphabet[int(sum[i])%32])
	}
	return b.String()
}

// planOptions shape testPlan's nodes.
type planOptions struct {
	memMiB        int64
	cpus          int
	pdisks, disks []string
	stale         bool
	resize        bool                    // a changed node is resize, not recreate (only -mem may change)
	uefi          bool                    // the image boots UEFI
	uefiOnly      map[string]bool         // only these nodes' image boots UEFI (a forged, mixed plan)
	arch          string                  // the image's architecture (default amd64)
	aliases       map[string][]string     // node → aliases
	fqdns         map[string]string       // node → FQDN (an FQDN nodename)
	shares        map[string][]spec.Share // node → vm_shares
	rootMiB       map[string]int64        // node → root disk MiB (default 32)
}

// testPlan builds a barn.plan/v1 for names against the applied state under
// getenv's BARN_HOME, classifying like barn-plan (create / start /
// unchanged / recreate / missing).
func testPlan(getenv func(string) string, names []string, o planOptions) (*plan.Plan, error) {
	if o.memMiB == 0 {
		o.memMiB = 512
	}
	if o.cpus == 0 {
		o.cpus = 1
	}
	id, err := testImage(getenv("BARN_HOME"))
	if err != nil {
		return nil, err
	}
	if o.uefi {
		id.Boot = "uefi"
	}
	if o.arch != "" {
		id.Arch = o.arch
	}
	s := spec.Spec{Deployment: spec.Deployment{Name: spec.DeploymentName, Arch: "amd64", Image: "t1",
		Subnet: spec.Subnet{CIDR: "10.10.10.0/24", Host: "10.10.10.1", Reserved: "10.10.10.2-10.10.10.8", Pool: "10.10.10.9-10.10.10.254"},
		User:   spec.User{Name: "dba", UID: 88}}, Skipped: []spec.Skipped{}, Nodes: []spec.Node{}}
	for i, n := range names {
		octet := 10 + i
		sn := spec.Node{Name: n, Address: fmt.Sprintf("10.10.10.%d", octet), Control: i == 0,
			MAC:   spec.NICs{Management: fmt.Sprintf("52:54:00:00:0a:%02x", octet), Private: fmt.Sprintf("52:54:00:01:0a:%02x", octet)},
			Image: "t1", CPUs: o.cpus, MemoryBytes: o.memMiB << 20, RootDiskBytes: cmp.Or(o.rootMiB[n], 32) << 20, Disks: []spec.Disk{}, Aliases: []string{}, Shares: []spec.Share{}}
		sn.Aliases = append(sn.Aliases, o.aliases[n]...)
		sn.FQDN = o.fqdns[n]
		for _, d := range o.pdisks {
			sn.Disks = append(sn.Disks, spec.Disk{Name: d, Mount: "/" + d, SizeBytes: 64 << 20, FS: "ext4", Persistent: true, Serial: serial(n, d)})
		}
		for _, d := range o.disks {
			sn.Disks = append(sn.Disks, spec.Disk{Name: d, Mount: "/" + d, SizeBytes: 64 << 20, FS: "ext4", Serial: serial(n, d)})
		}
		sn.Shares = append(sn.Shares, o.shares[n]...)
		s.Nodes = append(s.Nodes, sn)
	}
	if len(s.Nodes) > 0 {
		s.Control = s.Nodes[0].Name
	}
	s.Seal()
	root, err := state.Inspect(getenv)
	if err != nil {
		return nil, err
	}
	applied, err := root.ReadDeployment()
	if err != nil {
		return nil, err
	}
	p := &plan.Plan{Schema: plan.Schema, Spec: s, Selected: []string{}, Nodes: []plan.NodePlan{}, Images: []imageref.Identity{id}, Warnings: []plan.Warning{},
		Totals: plan.Totals{Disks: []plan.DiskSize{}}}
	if applied != nil {
		p.BasedOn = plan.BasedOn{Generation: applied.Generation, SpecHash: applied.SpecHash}
	}
	if o.stale {
		p.BasedOn.Generation = 99
	}
	desired := map[string]bool{}
	counts := map[plan.Outcome]int{}
	for _, n := range s.Nodes {
		desired[n.Name] = true
		img := id
		if o.uefiOnly[n.Name] {
			img.Boot = "uefi"
		}
		np := plan.NodePlan{Name: n.Name, Address: n.Address, Changes: []plan.Change{}, Summary: []string{}, Image: &img}
		st, err := root.ReadNode(n.Name)
		if err != nil {
			return nil, err
		}
		switch {
		case st == nil:
			np.Outcome = plan.Create
		case st.SpecHash != n.SpecHash && o.resize:
			np.Outcome = plan.Resize
		case st.SpecHash != n.SpecHash:
			np.Outcome = plan.Recreate
		case st.Phase == state.Running:
			np.Outcome = plan.Unchanged
		default:
			np.Outcome = plan.Start
		}
		counts[np.Outcome]++
		p.Nodes = append(p.Nodes, np)
	}
	dirs, err := root.NodeNames()
	if err != nil {
		return nil, err
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		if st, _ := root.ReadNode(d); st != nil && !desired[d] {
			p.Nodes = append(p.Nodes, plan.NodePlan{Name: d, Outcome: plan.Missing, Changes: []plan.Change{}, Summary: []string{}})
			counts[plan.Missing]++
		}
	}
	switch {
	case counts[plan.Missing] > 0:
		p.Action = plan.ActionBlocked
	case counts[plan.Recreate] > 0:
		p.Action = plan.ActionRecreate
	case counts[plan.Resize] > 0:
		p.Action = plan.ActionResize
	case applied == nil:
		p.Action = plan.ActionCreate
	case counts[plan.Create] > 0:
		p.Action = plan.ActionConverge
	case counts[plan.Start] > 0:
		p.Action = plan.ActionStart
	default:
		p.Action = plan.ActionNone
	}
	return p, nil
}

// cmdTestplan prints a barn.plan/v1 for the named nodes against the
// applied state in BARN_HOME, like barn-plan would. Flags before the names:
//
//	-mem=MiB            memory of every named node (default 512)
//	-pdisk=NAME         a 64 MiB persistent data disk at /NAME on every node
//	-disk=NAME          a 64 MiB non-persistent data disk at /NAME
//	-stale              use based_on generation 99 (a stale plan)
//	-resize             a node whose spec changed is resize (use with -mem, -cpu, -root only)
//	-root=NODE:MiB      NODE's root disk (default 32 MiB)
//	-uefi               the image boots UEFI (firmware: BARN_TEST_FIRMWARE)
//	-uefi=NODE          only NODE's image boots UEFI (a forged plan: barn-plan refuses it)
//	-arch=ARCH          the image's architecture
//	-alias=NODE:ALIAS   an inventory alias of NODE (repeatable)
//	-share=NODE:HOST:GUEST[:rw]
//	                    a vm_shares entry of NODE (HOST relative to $WORK;
//	                    read-only unless :rw), tagged like barn-inventory
func cmdTestplan(ts *testscript.TestScript, neg bool, args []string) {
	o := planOptions{aliases: map[string][]string{}, fqdns: map[string]string{}, shares: map[string][]spec.Share{}, rootMiB: map[string]int64{}}
	var names []string
	for _, a := range args {
		switch {
		case strings.HasPrefix(a, "-share="):
			f := strings.Split(strings.TrimPrefix(a, "-share="), ":")
			if len(f) < 3 || len(f) > 4 || len(f) == 4 && f[3] != "rw" {
				ts.Fatalf("testplan: bad %s (want -share=NODE:HOST:GUEST[:rw])", a)
			}
			sh := spec.Share{Host: ts.MkAbs(f[1]), Guest: f[2], Readonly: len(f) == 3}
			sh.Tag = inventory.ShareTag(sh.Host, sh.Guest, sh.Readonly)
			o.shares[f[0]] = append(o.shares[f[0]], sh)
		case strings.HasPrefix(a, "-mem="):
			v, err := strconv.ParseInt(strings.TrimPrefix(a, "-mem="), 10, 64)
			ts.Check(err)
			o.memMiB = v
		case strings.HasPrefix(a, "-root="):
			n, v, ok := strings.Cut(strings.TrimPrefix(a, "-root="), ":")
			mib, err := strconv.ParseInt(v, 10, 64)
			if !ok || err != nil {
				ts.Fatalf("testplan: want -root=NODE:MiB, got %q", a)
			}
			o.rootMiB[n] = mib
		case strings.HasPrefix(a, "-cpu="):
			v, err := strconv.Atoi(strings.TrimPrefix(a, "-cpu="))
			ts.Check(err)
			o.cpus = v
		case strings.HasPrefix(a, "-pdisk="):
			o.pdisks = append(o.pdisks, strings.TrimPrefix(a, "-pdisk="))
		case strings.HasPrefix(a, "-disk="):
			o.disks = append(o.disks, strings.TrimPrefix(a, "-disk="))
		case a == "-stale":
			o.stale = true
		case a == "-resize":
			o.resize = true
		case a == "-uefi":
			o.uefi = true
		case strings.HasPrefix(a, "-uefi="):
			if o.uefiOnly == nil {
				o.uefiOnly = map[string]bool{}
			}
			o.uefiOnly[strings.TrimPrefix(a, "-uefi=")] = true
		case strings.HasPrefix(a, "-arch="):
			o.arch = strings.TrimPrefix(a, "-arch=")
		case strings.HasPrefix(a, "-fqdn="):
			n, f, ok := strings.Cut(strings.TrimPrefix(a, "-fqdn="), ":")
			if !ok {
				ts.Fatalf("testplan: want -fqdn=NODE:FQDN, got %q", a)
			}
			o.fqdns[n] = f
		case strings.HasPrefix(a, "-alias="):
			n, al, ok := strings.Cut(strings.TrimPrefix(a, "-alias="), ":")
			if !ok {
				ts.Fatalf("testplan: want -alias=NODE:ALIAS, got %q", a)
			}
			o.aliases[n] = append(o.aliases[n], al)
		default:
			names = append(names, a)
		}
	}
	p, err := testPlan(ts.Getenv, names, o)
	ts.Check(err)
	b, err := wire.Marshal(p)
	ts.Check(err)
	ts.Stdout().Write(append(b, '\n'))
}

// spawnsleep starts an unrelated `sleep 300` and records its PID in
// $WORK/sleep.pid (killed when the script ends).
func cmdSpawnSleep(ts *testscript.TestScript, neg bool, args []string) {
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	ts.Check(cmd.Start())
	go cmd.Wait()
	ts.Check(os.WriteFile(ts.MkAbs("sleep.pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o600))
}

// setpid NODE PIDFILE: rewrite NODE's recorded process PID to the PID in
// PIDFILE, keeping the rest of the tuple (so the live process is foreign).
func cmdSetPID(ts *testscript.TestScript, neg bool, args []string) {
	root, err := state.Open(ts.Getenv)
	ts.Check(err)
	n, err := root.ReadNode(args[0])
	ts.Check(err)
	b, err := os.ReadFile(ts.MkAbs(args[1]))
	ts.Check(err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	ts.Check(err)
	if n.Process == nil {
		// a stopped node: record it as running with a tuple of a QEMU that
		// started at another time (so the live PID is provably foreign)
		boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
		ts.Check(err)
		n.Process = &vmrecord.Process{PID: pid, Executable: "/usr/bin/qemu-system-x86_64", ExecutableFile: "1:1", Started: "procstat:1",
			ArgvHash: strings.Repeat("0", 64), Boot: strings.TrimSpace(string(boot))}
		n.Phase = state.Running
	}
	n.Process.PID = pid
	ts.Check(root.WriteNode(n))
}

// alive PIDFILE: the process whose PID is in PIDFILE is alive (negate with !).
func cmdAlive(ts *testscript.TestScript, neg bool, args []string) {
	b, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	ts.Check(err)
	alive := syscall.Kill(pid, 0) == nil
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && strings.Contains(string(stat), ") Z ") {
		alive = false
	}
	if alive == neg {
		ts.Fatalf("process %d alive=%v", pid, alive)
	}
}

// killfake NODE: SIGKILL NODE's fake QEMU (found by its pidfile, checked
// to be our runtime's QEMU), leaving the socket and pidfile behind.
func cmdKillFake(ts *testscript.TestScript, neg bool, args []string) {
	pidfile := filepath.Join(ts.Getenv("BARN_RUNTIME_DIR"), args[0], state.PidfileName)
	b, err := os.ReadFile(pidfile)
	ts.Check(err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	ts.Check(err)
	cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if !strings.Contains(string(cmd), ts.Getenv("BARN_RUNTIME_DIR")) {
		ts.Fatalf("pid %d is not this test's QEMU", pid)
	}
	ts.Check(syscall.Kill(pid, syscall.SIGKILL))
	for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	_ = os.WriteFile(ts.MkAbs(args[0]+".pid"), b, 0o600)
}

// waitdead PIDFILE: wait up to 10 s for the process to exit.
func cmdWaitDead(ts *testscript.TestScript, neg bool, args []string) {
	b, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	for i := 0; i < 500; i++ {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	ts.Fatalf("process %d still alive", pid)
}

// race2 PLAN_A PLAN_B: run two `barn-node apply --no-wait` at once, one per
// plan (both computed against the same applied generation). Exactly one
// must succeed; the other must wait for the deployment lock and then be
// refused as a stale plan (exit 4), so no two applies ever allocate from
// the same view of the ports.
func cmdRace2(ts *testscript.TestScript, neg bool, args []string) {
	var env []string
	for _, k := range []string{"BARN_HOME", "BARN_RUNTIME_DIR", "BARN_QEMU", "BARN_ACCEL", "BARN_PRIVATE_NET", "BARN_READINESS", "BARN_STOP_TIMEOUT", "PATH", "HOME", "TMPDIR"} {
		env = append(env, k+"="+ts.Getenv(k))
	}
	type outcome struct {
		code int
		out  []byte
	}
	results := make(chan outcome, 2)
	for _, p := range args[:2] {
		in, err := os.Open(ts.MkAbs(p))
		ts.Check(err)
		cmd := exec.Command("barn-node", "apply", "--no-wait")
		cmd.Env, cmd.Stdin = env, in
		go func() {
			out, err := cmd.Output()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				code = -1
			}
			in.Close()
			results <- outcome{code, out}
		}()
	}
	a, b := <-results, <-results
	if a.code > b.code {
		a, b = b, a
	}
	if a.code != 0 || b.code != 4 || !strings.Contains(string(b.out), "stale_plan") {
		ts.Fatalf("race2: exit codes %d and %d, want 0 and 4 (stale_plan)\n%s\n%s", a.code, b.code, a.out, b.out)
	}
	ts.Stdout().Write(a.out)
}

var (
	listenersMu sync.Mutex
	listeners   = map[*testscript.TestScript]net.Listener{}
)

// listen PORT: hold 127.0.0.1:PORT open (another process's port, as far as
// barn-node can tell) until unlisten.
func cmdListen(ts *testscript.TestScript, neg bool, args []string) {
	l, err := net.Listen("tcp", "127.0.0.1:"+args[0])
	ts.Check(err)
	listenersMu.Lock()
	listeners[ts] = l
	listenersMu.Unlock()
	ts.Defer(func() { l.Close() })
}

func cmdUnlisten(ts *testscript.TestScript, neg bool, args []string) {
	listenersMu.Lock()
	defer listenersMu.Unlock()
	if l := listeners[ts]; l != nil {
		l.Close()
		delete(listeners, ts)
	}
}

// runningPID returns NODE's fake QEMU PID from its runtime pidfile, checked
// to be this test's QEMU.
func runningPID(ts *testscript.TestScript, node string) int {
	b, err := os.ReadFile(filepath.Join(ts.Getenv("BARN_RUNTIME_DIR"), node, state.PidfileName))
	ts.Check(err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	ts.Check(err)
	cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if !strings.Contains(string(cmd), ts.Getenv("BARN_RUNTIME_DIR")) {
		ts.Fatalf("pid %d is not this test's QEMU", pid)
	}
	return pid
}

// fdlink NODE FD: print what descriptor FD of NODE's running QEMU refers
// to (the /proc/<pid>/fd/<FD> link), e.g. an inherited share directory.
func cmdFDLink(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: fdlink NODE FD")
	}
	target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", runningPID(ts, args[0]), args[1]))
	ts.Check(err)
	fmt.Fprintln(ts.Stdout(), target)
}

// noheadroom NODE: record NODE's invocation as Barn recorded it before the
// hot-plug headroom policy, without invocation.headroom (the running fake
// QEMU and its process tuple are left as they are).
func cmdNoHeadroom(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: noheadroom NODE")
	}
	root, err := state.Open(ts.Getenv)
	ts.Check(err)
	n, err := root.ReadNode(args[0])
	ts.Check(err)
	if n == nil || n.Invocation.Headroom == nil {
		ts.Fatalf("noheadroom: %s has no recorded headroom", args[0])
	}
	n.Invocation.Headroom = nil
	ts.Check(root.WriteNode(n))
}

// argvhash NODE: print the argv hash of NODE's recorded process tuple.
func cmdArgvHash(ts *testscript.TestScript, neg bool, args []string) {
	root, err := state.Open(ts.Getenv)
	ts.Check(err)
	n, err := root.ReadNode(args[0])
	ts.Check(err)
	if n == nil || n.Process == nil {
		ts.Fatalf("%s has no recorded process", args[0])
	}
	fmt.Fprintln(ts.Stdout(), n.Process.ArgvHash)
}

// spawnclaim NODE: start an unrelated process (a shell blocked in the
// read builtin: it never forks) whose argv claims NODE's VM UUID
// ("-uuid <vm_uuid>") without running its invocation; its PID goes to
// $WORK/claim.pid (killed when the script ends).
func cmdSpawnClaim(ts *testscript.TestScript, neg bool, args []string) {
	root, err := state.Open(ts.Getenv)
	ts.Check(err)
	n, err := root.ReadNode(args[0])
	ts.Check(err)
	r, w, err := os.Pipe()
	ts.Check(err)
	cmd := exec.Command("sh", "-c", "read x", "-uuid", "-uuid", n.VMUUID)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	ts.Check(cmd.Start())
	r.Close()
	go func() { cmd.Wait(); w.Close() }() // the pipe stays open until it exits
	for i := 0; i < 200; i++ {            // until exec shows the claiming argv
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cmd.Process.Pid)); strings.Contains(string(b), n.VMUUID) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	ts.Check(os.WriteFile(ts.MkAbs("claim.pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o600))
}

// killpid PIDFILE: SIGKILL the process whose PID is in PIDFILE (one this
// script spawned) and wait until it is gone.
func cmdKillPID(ts *testscript.TestScript, neg bool, args []string) {
	b, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	ts.Check(err)
	ts.Check(syscall.Kill(pid, syscall.SIGKILL))
	for i := 0; i < 250 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(20 * time.Millisecond)
	}
}

var (
	heldMu sync.Mutex
	held   = map[*testscript.TestScript]net.Conn{}
)

// holdqmp SOCKET: connect to a QMP socket as an operator's session would,
// read its greeting and keep the connection open until releaseqmp.
func cmdHoldQMP(ts *testscript.TestScript, neg bool, args []string) {
	c, err := net.Dial("unix", args[0])
	ts.Check(err)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 1)
	for buf[0] != '\n' {
		_, err := c.Read(buf)
		ts.Check(err)
	}
	heldMu.Lock()
	held[ts] = c
	heldMu.Unlock()
	ts.Defer(func() { c.Close() })
}

func cmdReleaseQMP(ts *testscript.TestScript, neg bool, args []string) {
	heldMu.Lock()
	defer heldMu.Unlock()
	if c := held[ts]; c != nil {
		c.Close()
		delete(held, ts)
	}
}

// flipbyte FILE OFFSET: invert the byte at OFFSET (negative: from the
// end) of FILE in place, keeping its size and mode — a bit rot or a
// tampered cache file the size check alone cannot see.
func cmdFlipByte(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: flipbyte FILE OFFSET")
	}
	p := ts.MkAbs(args[0])
	off, err := strconv.ParseInt(args[1], 10, 64)
	ts.Check(err)
	fi, err := os.Stat(p)
	ts.Check(err)
	if off < 0 {
		off += fi.Size()
	}
	ts.Check(os.Chmod(p, 0o600))
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	ts.Check(err)
	b := make([]byte, 1)
	_, err = f.ReadAt(b, off)
	ts.Check(err)
	b[0] ^= 0xff
	_, err = f.WriteAt(b, off)
	ts.Check(err)
	ts.Check(f.Close())
	ts.Check(os.Chmod(p, fi.Mode().Perm()))
}

var shippedOnce struct {
	sync.Once
	dir  string // set by TestScripts: its t.TempDir
	path string
	err  error
}

// cmdShipped: `shipped` builds the barn-node that `make build` ships (the
// main package, without test code) once per TestScripts run, into that
// test's temp dir, and copies it to $WORK/shipped/barn-node, so a script
// can prove what the shipped binary does, not only what the in-process
// test command does.
func cmdShipped(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: shipped")
	}
	shippedOnce.Do(func() {
		if shippedOnce.dir == "" {
			shippedOnce.err = errors.New("shipped: only TestScripts provides the build directory")
			return
		}
		shippedOnce.path = filepath.Join(shippedOnce.dir, "barn-node")
		cmd := exec.Command("go", "build", "-o", shippedOnce.path, "barn.dev/barn-node")
		cmd.Dir = ".." // the barn-node module; the test runs in its cli package
		if out, err := cmd.CombinedOutput(); err != nil {
			shippedOnce.err = fmt.Errorf("go build barn.dev/barn-node: %v\n%s", err, out)
		}
	})
	ts.Check(shippedOnce.err)
	data, err := os.ReadFile(shippedOnce.path)
	ts.Check(err)
	ts.Check(os.MkdirAll(ts.MkAbs("shipped"), 0o755))
	ts.Check(testexec.WriteScript(ts.MkAbs("shipped/barn-node"), data))
}
