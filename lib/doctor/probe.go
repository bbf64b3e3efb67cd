package doctor

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/hostnet"
	"barn.dev/lib/qemu"
	"barn.dev/lib/state"
)

// Probe is how the doctor observes the host. Every field may be left nil
// (or empty) for the real host; tests replace them.
type Probe struct {
	// Getenv reads BARN_QEMU, BARN_ACCEL, BARN_NET_HELPER, BARN_HOME,
	// BARN_NET_* and the other variables barn-node and barn-net read.
	Getenv func(string) string
	// LookPath finds a program (exec.LookPath).
	LookPath func(string) (string, error)
	// Exec runs a program, bounded by ctx, and returns its stdout and
	// stderr.
	Exec func(ctx context.Context, name string, args ...string) (stdout, stderr []byte, err error)
	// Smoke starts bin paused with accel (qemu.SmokeStart).
	Smoke func(ctx context.Context, bin, accel string) qemu.Smoke
	// OpenKVM opens /dev/kvm read-write (qemu.OpenKVM).
	OpenKVM func() error
	// Firmware are the UEFI firmware pairs probed (qemu.FirmwarePairs).
	Firmware []qemu.Firmware
	// ForeignSmoke starts a foreign guest's emulator paused as Barn runs
	// it (qemu.SmokeForeign).
	ForeignSmoke func(ctx context.Context, bin string, t qemu.Target) qemu.Smoke
	// ForeignFirmware are the firmware pairs probed per foreign
	// architecture; a missing entry means the target's distro locations.
	ForeignFirmware map[string][]qemu.Firmware
	// Network is the private network preflight (lib/hostnet, as `barn-net
	// preflight` runs it, for the applied deployment's subnet, else the
	// installed network's, else the default).
	Network func(ctx context.Context) (hostnet.Report, error)
	// GOOS and GOARCH are the host's (runtime.GOOS, runtime.GOARCH).
	GOOS, GOARCH string
}

// queryTimeout bounds each QEMU query and --version.
const queryTimeout = 10 * time.Second

func (p *Probe) defaults() {
	if p.Getenv == nil {
		p.Getenv = func(string) string { return "" }
	}
	if p.LookPath == nil {
		p.LookPath = exec.LookPath
	}
	if p.Exec == nil {
		p.Exec = func(ctx context.Context, name string, args ...string) ([]byte, []byte, error) {
			var out, errb bytes.Buffer
			cmd := exec.CommandContext(ctx, name, args...)
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			return out.Bytes(), errb.Bytes(), err
		}
	}
	if p.Smoke == nil {
		p.Smoke = func(ctx context.Context, bin, accel string) qemu.Smoke {
			return qemu.SmokeStart(ctx, bin, accel)
		}
	}
	if p.OpenKVM == nil {
		p.OpenKVM = func() error { return qemu.OpenKVM(qemu.KVMDevice) }
	}
	if p.Firmware == nil {
		p.Firmware = qemu.FirmwarePairs
	}
	if p.ForeignSmoke == nil {
		p.ForeignSmoke = qemu.SmokeForeign
	}
	if p.Network == nil {
		p.Network = p.hostNetwork
	}
	if p.GOOS == "" {
		p.GOOS, p.GOARCH = runtime.GOOS, runtime.GOARCH
	}
}

func (p *Probe) run(ctx context.Context, name string, args ...string) ([]byte, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	return p.Exec(ctx, name, args...)
}

// query runs `bin <flag> help` and returns its stdout lines, or an error
// naming the command and its stderr.
func (p *Probe) query(ctx context.Context, bin, flag string) ([]string, error) {
	out, errOut, err := p.run(ctx, bin, flag, "help")
	if err != nil {
		return nil, fmt.Errorf("%s %s help: %v: %s", bin, flag, err, firstLine(string(errOut)))
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n"), nil
}

func (p *Probe) host(r *Report) {
	_, known := qemu.Targets[p.GOARCH]
	switch {
	case p.GOOS == "linux" && p.GOARCH == "amd64":
		r.add("host", OK, ClassCapability, "linux/amd64", "")
	case p.GOOS == "linux" && known:
		r.add("host", Warn, ClassCapability, fmt.Sprintf("linux/%s: Barn builds its native guests and emulated amd64 guests (single-threaded TCG) here, but no %s host has run them", p.GOARCH, p.GOARCH),
			"nothing to change here; README \"Foreign-architecture guests\" says what is proven where")
	default:
		r.add("host", Error, ClassCapability, fmt.Sprintf("%s/%s: Barn launches guests on linux/amd64 and linux/arm64 hosts only", p.GOOS, p.GOARCH),
			"run Barn on a linux/amd64 host")
	}
}

// qemuFix installs the emulator of the host's own architecture (its
// native guests' QEMU), Debian's package name.
func (p *Probe) qemuFix() string {
	return "sudo apt-get install " + cmp.Or(qemu.Targets[p.GOARCH].Package, "qemu-system-x86")
}

// qemu returns the binary barn-node would launch, "" when there is none.
func (p *Probe) qemu(ctx context.Context, r *Report) string {
	bin, err := qemu.ResolveBinary(p.Getenv, p.LookPath)
	if err != nil {
		r.add("qemu", Error, ClassCapability, err.Error(), p.qemuFix())
		return ""
	}
	r.add("qemu", OK, ClassCapability, bin, "")
	return bin
}

// MinQEMU is the oldest QEMU this Barn is tested with (Debian 12's).
const MinQEMU = "7.2.0"

func (p *Probe) version(ctx context.Context, r *Report, bin string) {
	out, errOut, err := p.run(ctx, bin, "--version")
	if err != nil {
		r.add("qemu-version", Error, ClassCapability, fmt.Sprintf("%s --version: %v: %s", bin, err, firstLine(string(errOut))), p.qemuFix())
		return
	}
	v, err := qemu.ParseVersion(out)
	if err != nil {
		r.add("qemu-version", Error, ClassCapability, err.Error(), p.qemuFix())
		return
	}
	if older(v, MinQEMU) {
		r.add("qemu-version", Warn, ClassCapability, fmt.Sprintf("QEMU %s is older than %s, the oldest version Barn is tested with", v, MinQEMU),
			"install QEMU "+MinQEMU+" or newer")
		return
	}
	r.add("qemu-version", OK, ClassCapability, "QEMU "+v, "")
}

// older compares dotted numeric versions ("7.1.5" < "7.2.0").
func older(v, min string) bool {
	a, b := strings.Split(v, "."), strings.Split(min, ".")
	for i := 0; i < len(b); i++ {
		var x, y int
		if i < len(a) {
			x, _ = strconv.Atoi(strings.TrimFunc(a[i], func(r rune) bool { return r < '0' || r > '9' }))
		}
		y, _ = strconv.Atoi(b[i])
		if x != y {
			return x < y
		}
	}
	return false
}

// accelerator reports the accelerators QEMU lists, then proves the one
// barn-node would use with a real smoke start: KVM (required unless
// BARN_ACCEL=tcg; never a silent fallback) or TCG when explicitly chosen.
func (p *Probe) accelerator(ctx context.Context, r *Report, bin string) {
	lines, err := p.query(ctx, bin, "-accel")
	if err != nil {
		r.add("accelerator", Error, ClassCapability, err.Error(), p.qemuFix())
		return
	}
	listed := map[string]bool{}
	var names []string
	for _, l := range lines[1:] {
		if l = strings.TrimSpace(l); l != "" {
			listed[l] = true
			names = append(names, l)
		}
	}
	choice := p.Getenv("BARN_ACCEL")
	switch {
	case choice != "" && choice != qemu.AccelKVM && choice != qemu.AccelTCG:
		r.add("accelerator", Error, ClassCapability, fmt.Sprintf("BARN_ACCEL=%q: want kvm or tcg (QEMU lists %s)", choice, strings.Join(names, ", ")),
			"unset BARN_ACCEL (KVM), or BARN_ACCEL=tcg")
		return
	case !listed[qemu.AccelTCG]:
		r.add("accelerator", Error, ClassCapability, "QEMU lists no tcg accelerator: "+strings.Join(names, ", "), p.qemuFix())
		return
	}
	wantKVM := choice != qemu.AccelTCG
	policy := "KVM required (BARN_ACCEL unset); TCG only by explicit BARN_ACCEL=tcg"
	if !wantKVM {
		policy = "TCG explicitly requested (BARN_ACCEL=tcg)"
	}
	r.add("accelerator", OK, ClassCapability, fmt.Sprintf("QEMU lists %s; %s", strings.Join(names, ", "), policy), "")

	// A failing KVM is an error only when apply needs it.
	failed := Warn
	tcgFix := "BARN_ACCEL=tcg barn-node apply   # explicit software emulation (slow)"
	if wantKVM {
		failed = Error
	}
	kvmOK := false
	switch err := p.OpenKVM(); {
	case err != nil:
		fix := "sudo usermod -aG kvm $USER (then log in again), or " + tcgFix
		if errors.Is(err, fs.ErrNotExist) {
			fix = "enable hardware virtualization and load kvm_intel or kvm_amd, or " + tcgFix
		}
		if !wantKVM {
			fix = ""
		}
		r.add("kvm", failed, ClassCapability, fmt.Sprintf("%s does not open read-write: %v", qemu.KVMDevice, err), fix)
	case !listed[qemu.AccelKVM]:
		r.add("kvm", failed, ClassCapability, qemu.KVMDevice+" opens, but this QEMU lists no kvm accelerator", p.qemuFix())
	default:
		r.add("kvm", OK, ClassCapability, qemu.KVMDevice+" opens read-write", "")
		s := p.Smoke(ctx, bin, qemu.AccelKVM)
		if s.OK {
			kvmOK = true
			r.add("kvm-real-smoke", OK, ClassCapability, s.Evidence, "")
		} else {
			fix := tcgFix + ", or fix the host's KVM (this /dev/kvm cannot run a vCPU)"
			if !wantKVM {
				fix = ""
			}
			r.add("kvm-real-smoke", failed, ClassCapability, s.Evidence, fix)
		}
	}
	if wantKVM {
		if kvmOK {
			r.Accelerator = qemu.AccelKVM
		}
		return
	}
	s := p.Smoke(ctx, bin, qemu.AccelTCG)
	if !s.OK {
		r.add("tcg-real-smoke", Error, ClassCapability, s.Evidence, p.qemuFix())
		return
	}
	r.Accelerator = qemu.AccelTCG
	r.add("tcg-real-smoke", OK, ClassCapability, s.Evidence, "")
}

func (p *Probe) machine(ctx context.Context, r *Report, bin string) {
	lines, err := p.query(ctx, bin, "-machine")
	if err != nil {
		r.add("machine", Error, ClassCapability, err.Error(), p.qemuFix())
		return
	}
	want := cmp.Or(qemu.Targets[p.GOARCH].Machine, "q35")
	for _, l := range lines {
		if f := strings.Fields(l); len(f) > 0 && f[0] == want {
			r.add("machine", OK, ClassCapability, strings.Join(f, " "), "")
			return
		}
	}
	r.add("machine", Error, ClassCapability, bin+" -machine help lists no "+want+" machine", p.qemuFix())
}

func (p *Probe) cpu(ctx context.Context, r *Report, bin string) {
	lines, err := p.query(ctx, bin, "-cpu")
	if err != nil {
		r.add("cpu", Error, ClassCapability, err.Error(), p.qemuFix())
		return
	}
	have := map[string]bool{}
	for _, l := range lines {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "x86" {
			have[f[1]] = true
		}
	}
	need := []string{"max"} // TCG
	if p.Getenv("BARN_ACCEL") != qemu.AccelTCG {
		need = []string{"host", "max"} // KVM uses host
	}
	var missing []string
	for _, m := range need {
		if !have[m] {
			missing = append(missing, m)
		}
	}
	if len(missing) > 0 {
		r.add("cpu", Error, ClassCapability, bin+" -cpu help lists no "+strings.Join(missing, ", "), p.qemuFix())
		return
	}
	r.add("cpu", OK, ClassCapability, "CPU models "+strings.Join(need, ", "), "")
}

// Devices are the QEMU devices a node's invocation uses; shares (9p) only
// when vm_shares is set.
var (
	Devices      = []string{"virtio-blk-pci", "virtio-net-pci", "virtio-scsi-pci", "scsi-cd"}
	ShareDevices = []string{"virtio-9p-pci"}
)

func (p *Probe) devices(ctx context.Context, r *Report, bin string) {
	lines, err := p.query(ctx, bin, "-device")
	if err != nil {
		r.add("devices", Error, ClassCapability, err.Error(), p.qemuFix())
		return
	}
	have := map[string]bool{}
	for _, l := range lines {
		if name, ok := strings.CutPrefix(strings.TrimSpace(l), `name "`); ok {
			name, _, _ = strings.Cut(name, `"`)
			have[name] = true
		}
	}
	missing := func(list []string) []string {
		var out []string
		for _, d := range list {
			if !have[d] {
				out = append(out, d)
			}
		}
		return out
	}
	if m := missing(Devices); len(m) > 0 {
		r.add("devices", Error, ClassCapability, bin+" has no "+strings.Join(m, ", "), p.qemuFix())
		return
	}
	all := strings.Join(append(append([]string{}, Devices...), ShareDevices...), ", ")
	if m := missing(ShareDevices); len(m) > 0 {
		r.add("devices", Warn, ClassCapability, strings.Join(Devices, ", ")+"; no "+strings.Join(m, ", ")+": nodes with vm_shares cannot start",
			"a QEMU with 9p support (Debian's qemu-system-x86)")
		return
	}
	r.add("devices", OK, ClassCapability, all, "")
}

func (p *Probe) netdevs(ctx context.Context, r *Report, bin string) {
	lines, err := p.query(ctx, bin, "-netdev")
	if err != nil {
		r.add("netdev", Error, ClassCapability, err.Error(), p.qemuFix())
		return
	}
	have := map[string]bool{}
	for _, l := range lines[1:] {
		have[strings.TrimSpace(l)] = true
	}
	var missing []string
	for _, n := range []string{"user", "bridge"} { // management NIC, private NIC
		if !have[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		r.add("netdev", Error, ClassCapability, bin+" has no "+strings.Join(missing, ", ")+" netdev (user: the management NIC; bridge: the private NIC)", p.qemuFix())
		return
	}
	r.add("netdev", OK, ClassCapability, "user (management NIC), bridge (private NIC)", "")
}

func (p *Probe) bridgeHelper(r *Report) {
	h, err := qemu.FindBridgeHelper(p.Getenv)
	if err != nil {
		r.add("bridge-helper", Error, ClassCapability, err.Error(), exitcode.As(err).Next)
		return
	}
	r.add("bridge-helper", OK, ClassCapability, h, "")
}

func (p *Probe) qemuImg(ctx context.Context, r *Report) {
	bin, err := p.LookPath("qemu-img")
	if err != nil {
		r.add("qemu-img", Error, ClassCapability, "qemu-img: "+err.Error(), "sudo apt-get install qemu-utils")
		return
	}
	out, errOut, err := p.run(ctx, bin, "--version")
	if err != nil {
		r.add("qemu-img", Error, ClassCapability, fmt.Sprintf("%s --version: %v: %s", bin, err, firstLine(string(errOut))), "sudo apt-get install qemu-utils")
		return
	}
	r.add("qemu-img", OK, ClassCapability, bin+": "+firstLine(string(out)), "")
}

// firmware: every official image but el7 boots UEFI, so like Barn 0.9 the
// doctor always wants UEFI firmware.
func (p *Probe) firmware(r *Report) {
	fw, err := qemu.FindFirmware(p.Firmware)
	if err != nil {
		r.add("firmware", Error, ClassCapability, err.Error(), exitcode.As(err).Next)
		return
	}
	r.add("firmware", OK, ClassCapability, "UEFI code "+fw.Code+", vars template "+fw.Vars, "")
}

func (p *Probe) ssh(ctx context.Context, r *Report) {
	bin, err := p.LookPath("ssh")
	if err != nil {
		r.add("ssh", Error, ClassCapability, "ssh: "+err.Error()+" (readiness, barn-node ssh and exec use OpenSSH)", "sudo apt-get install openssh-client")
		return
	}
	out, errOut, err := p.run(ctx, bin, "-V") // OpenSSH prints its version on stderr
	if err != nil {
		r.add("ssh", Error, ClassCapability, fmt.Sprintf("%s -V: %v", bin, err), "sudo apt-get install openssh-client")
		return
	}
	v := firstLine(strings.TrimSpace(string(errOut) + string(out)))
	r.add("ssh", OK, ClassCapability, bin+": "+v, "")
}

// sshKeygen: Barn writes the deployment keys itself; ssh-keygen is only how
// a user inspects them (ssh-keygen -l -f ~/.barn/keys/id_ed25519.pub), and its
// absence means a partial OpenSSH client install: a warning, never an
// error.
func (p *Probe) sshKeygen(r *Report) {
	if kg, err := p.LookPath("ssh-keygen"); err != nil {
		r.add("ssh-keygen", Warn, ClassCapability, "ssh-keygen: "+err.Error()+" (not needed by Barn, which writes its keys itself; OpenSSH's tool to inspect them)", "sudo apt-get install --reinstall openssh-client")
	} else {
		r.add("ssh-keygen", OK, ClassCapability, kg, "")
	}
}

func (p *Probe) network(ctx context.Context, r *Report) {
	rep, err := p.Network(ctx)
	var errs, warns []hostnet.Finding
	for _, f := range rep.Findings {
		if f.Severity == hostnet.SevError {
			errs = append(errs, f)
		} else {
			warns = append(warns, f)
		}
	}
	messages := func(fs []hostnet.Finding) string {
		m := make([]string, len(fs))
		for i, f := range fs {
			m[i] = f.Message
		}
		return strings.Join(m, "; ")
	}
	switch {
	case len(errs) > 0:
		r.add("network", Error, ClassNetwork, fmt.Sprintf("private network %s on %s: %s", rep.CIDR, rep.Bridge, messages(errs)), errs[0].Fix)
	case err != nil:
		r.add("network", Error, ClassNetwork, "private network: "+err.Error(), exitcode.As(err).Next)
	case len(warns) > 0:
		r.add("network", Warn, ClassNetwork, fmt.Sprintf("private network %s on %s usable: %s", rep.CIDR, rep.Bridge, messages(warns)), warns[0].Fix)
	default:
		r.add("network", OK, ClassNetwork, fmt.Sprintf("private network %s on %s (host %s) usable through %s", rep.CIDR, rep.Bridge, rep.HostAddress, rep.Helper), "")
	}
}

// hostNetwork is the network preflight barn-node apply runs, for the
// subnet it would use: the applied deployment's, else the installed
// network's (barn-net's manifest), else the default.
func (p *Probe) hostNetwork(ctx context.Context) (hostnet.Report, error) {
	cidr := ""
	if root, err := state.Inspect(p.Getenv); err == nil && root.Exists() {
		d, err := root.ReadDeployment()
		if err != nil {
			// Another subnet's answer would not be about this deployment.
			return hostnet.Report{}, exitcode.Wrap(exitcode.ClassOf(err), err, "cannot read the applied deployment's subnet").
				WithNext("barn-state verify")
		}
		if d != nil {
			cidr = d.Spec.Deployment.Subnet.CIDR
		}
	}
	h := hostnet.FromEnv(p.Getenv)
	if cidr == "" {
		if m, err := h.ReadManifest(); err == nil && m != nil {
			cidr = m.CIDR
		}
	}
	return h.Preflight(ctx, cidr, "")
}

func (p *Probe) stateRoot(r *Report) {
	root, err := state.Inspect(p.Getenv)
	if err != nil {
		r.add("state", Error, ClassCapability, err.Error(), exitcode.As(err).Next)
		return
	}
	if !root.Exists() {
		r.add("state", OK, ClassCapability, root.Dir+" does not exist yet; the first apply creates it (0700)", "")
		return
	}
	// Every document and directory, as the commands will read them: a
	// damaged node state.json is a finding, never a root taken as sound.
	if problems := root.Verify(); len(problems) > 0 {
		next := state.OneNext(problems)
		if next == "" {
			next = "barn-state verify" // lists each problem with the step that settles it
		}
		r.add("state", Error, ClassCapability, describeProblems(root.Dir, problems), next)
		return
	}
	d, err := root.ReadDeployment()
	switch {
	case err != nil:
		r.add("state", Error, ClassCapability, err.Error(), "barn-state verify")
	case d == nil:
		r.add("state", OK, ClassCapability, root.Dir+": no deployment applied", "")
	default:
		r.add("state", OK, ClassCapability, fmt.Sprintf("%s: %d node(s) applied (generation %d)", root.Dir, len(d.Spec.Nodes), d.Generation), "")
	}
}

// describeProblems is the evidence of a damaged state root: how many
// problems barn-state verify finds, and the first few, each naming its
// file.
func describeProblems(dir string, problems []state.Problem) string {
	const shown = 3
	var parts []string
	for i, p := range problems {
		if i == shown {
			parts = append(parts, fmt.Sprintf("and %d more", len(problems)-shown))
			break
		}
		parts = append(parts, p.File+": "+p.Message)
	}
	return fmt.Sprintf("%s: %d problem(s): %s", dir, len(problems), strings.Join(parts, "; "))
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}

// foreign lists the foreign guest architectures this host can run, each
// proven by a paused smoke start of its emulator as Barn runs it (TCG by
// policy, the target's machine, CPU max) plus its UEFI firmware. None is
// a warning, not an error: native guests need no foreign emulator.
func (p *Probe) foreign(ctx context.Context, r *Report) {
	var ok, not, fixes []string
	for _, arch := range qemu.TargetArchs() {
		if arch == p.GOARCH {
			continue
		}
		why, err := p.foreignArch(ctx, arch)
		if err != nil {
			t := qemu.Targets[arch]
			not = append(not, arch+": "+err.Error())
			fixes = append(fixes, t.Package, t.FirmwarePackage)
			continue
		}
		ok = append(ok, arch+" ("+why+")")
		r.ForeignArchs = append(r.ForeignArchs, arch)
	}
	switch {
	case len(not) == 0 && len(ok) > 0:
		r.add("foreign-archs", OK, ClassCapability, "runs "+strings.Join(ok, "; "), "")
	case len(not) > 0:
		ev := "cannot run " + strings.Join(not, "; ")
		if len(ok) > 0 {
			ev = "runs " + strings.Join(ok, "; ") + "; " + ev
		}
		r.add("foreign-archs", Warn, ClassCapability, ev, "sudo apt-get install "+strings.Join(fixes, " "))
	}
}

// foreignArch proves one foreign architecture: emulator found, its
// version, a paused smoke start and the firmware.
func (p *Probe) foreignArch(ctx context.Context, arch string) (string, error) {
	t := qemu.Targets[arch]
	bin, err := p.LookPath(t.Binary)
	if err != nil {
		return "", fmt.Errorf("%s not found (package %s)", t.Binary, t.Package)
	}
	out, _, err := p.run(ctx, bin, "--version")
	v, verr := qemu.ParseVersion(out)
	if err != nil || verr != nil {
		return "", fmt.Errorf("%s --version: %v", bin, errors.Join(err, verr))
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	s := p.ForeignSmoke(sctx, bin, t)
	cancel()
	if !s.OK {
		return "", errors.New(s.Evidence)
	}
	fw, err := qemu.FindFirmwareOf(t, p.ForeignFirmware[arch])
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %s, machine %s, cpu %s, TCG thread=%s by policy, firmware %s; %s", bin, v, t.Machine, qemu.ForeignCPU,
		qemu.TCGThreads(arch, p.GOARCH), fw.Code, s.Evidence), nil
}
