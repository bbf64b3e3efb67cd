package lifecycle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"barn.dev/lib/cidata"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/hostnet"
	"barn.dev/lib/imageref"
	"barn.dev/lib/procid"
	"barn.dev/lib/qemu"
	"barn.dev/lib/qmp"
	"barn.dev/lib/spec"
	"barn.dev/lib/sshkeys"
	"barn.dev/lib/state"
	"barn.dev/lib/vm"
	"barn.dev/lib/vmrecord"
)

// RealOptions configure the production bindings.
type RealOptions struct {
	Getenv   func(string) string
	Progress io.Writer      // image pull progress; nil discards
	Stop     vm.StopOptions // the stop ladder's timeouts
	// Firmware are the UEFI firmware pairs probed for uefi images; nil
	// means the distro locations (qemu.FirmwarePairs).
	Firmware []qemu.Firmware
}

// Real returns a Manager bound to the real packages: the QEMU profile
// detected from the environment (BARN_QEMU, BARN_ACCEL, BARN_PRIVATE_NET…),
// lib/vm for launch/stop/audit, the image cache, cidata+sshkeys for the
// seed and hostnet for the network preflight. Readiness is left nil: the
// caller binds it (guest.WaitReady) unless --no-wait.
//
// Guests of a foreign architecture (arm64 on this amd64 host) get their
// own profile (qemu.ForeignProfile: TCG by policy), so a host without a
// usable hardware accelerator still runs them: that refusal is kept and
// returned only for native guests.
func Real(root *state.Root, o RealOptions) (*Manager, error) {
	prof, err := qemu.DetectProfile(o.Getenv, exec.LookPath)
	var nativeErr error
	if exitcode.As(err) != nil && exitcode.As(err).Reason == "accelerator_unavailable" {
		nativeErr = err
		if prof, err = qemu.DetectProfile(accelTCG(o.Getenv), exec.LookPath); err != nil {
			return nil, nativeErr
		}
	}
	if err != nil {
		return nil, err
	}
	m := &Manager{
		Root:   root,
		Emu:    &realEmulator{prof: prof, nativeErr: nativeErr, firmware: o.Firmware, lookPath: exec.LookPath},
		VM:     &realMachine{stop: o.Stop},
		Images: &realImages{root: root, progress: o.Progress},
		Seeds:  &realSeeder{root: root},
		Net:    &realNet{getenv: o.Getenv, bridge: prof.Bridge},
	}
	return m, nil
}

// accelTCG reads the environment with BARN_ACCEL=tcg: the host-wide parts
// of the profile (bridge, helper, private network) for foreign guests when
// native guests have no accelerator.
func accelTCG(getenv func(string) string) func(string) string {
	return func(k string) string {
		if k == "BARN_ACCEL" {
			return qemu.AccelTCG
		}
		return getenv(k)
	}
}

// Profile exposes the detected (native) QEMU profile of a Manager built
// by Real.
func (m *Manager) Profile() (qemu.Profile, bool) {
	e, ok := m.Emu.(*realEmulator)
	if !ok {
		return qemu.Profile{}, false
	}
	return e.prof, true
}

// realEmulator launches native guests with prof and foreign ones with the
// profile qemu.ForeignProfile derives from it, resolved once per
// architecture (emulator binary and its version).
type realEmulator struct {
	prof      qemu.Profile
	nativeErr error           // why native guests cannot launch (no accelerator), or nil
	firmware  []qemu.Firmware // nil: the target's distro locations (set only by test binaries)
	lookPath  func(string) (string, error)

	mu      sync.Mutex
	foreign map[string]qemu.Profile
}

// profile is the launch profile of guests of arch: the native one, or
// the foreign one with its emulator's version probed. Errors are
// capability errors naming what to install.
func (e *realEmulator) profile(arch string) (qemu.Profile, error) {
	host := qemu.HostArch()
	if arch == "" || arch == host {
		return e.prof, e.nativeErr
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if p, ok := e.foreign[arch]; ok {
		return p, nil
	}
	p, err := qemu.ForeignProfile(e.prof, arch, host, e.lookPath)
	if err != nil {
		return qemu.Profile{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if p.Version, err = qemu.ProbeVersion(ctx, p.Binary); err != nil {
		t, _ := qemu.TargetFor(arch)
		return qemu.Profile{}, exitcode.Wrap(exitcode.Capability, err, "the %s emulator %s does not run", arch, p.Binary).
			WithReason("qemu_missing").WithNext("sudo apt-get install --reinstall " + t.Package)
	}
	if e.foreign == nil {
		e.foreign = map[string]qemu.Profile{}
	}
	e.foreign[arch] = p
	return p, nil
}

func (e *realEmulator) Accel(arch string) string {
	p, err := e.profile(arch)
	if err != nil {
		return ""
	}
	return p.Accel
}

func (e *realEmulator) PrivateNet() string { return e.prof.PrivateNet }

// Firmware is the UEFI pair of id's architecture (the test hook's pairs
// when set).
func (e *realEmulator) Firmware(id imageref.Identity) (string, string, error) {
	if id.Boot != "uefi" {
		return "", "", nil
	}
	t, err := qemu.TargetFor(cmp.Or(id.Arch, qemu.HostArch()))
	if err != nil {
		return "", "", err
	}
	fw, err := qemu.FindFirmwareOf(t, e.firmware)
	return fw.Code, fw.Vars, err
}

// Supports resolves, before anything is downloaded or deleted, all a
// launch of id needs: the architecture, its emulator binary and version
// (installed, for a foreign guest), the machine and CPU model (policy),
// and the firmware of a uefi image.
func (e *realEmulator) Supports(id imageref.Identity) error {
	if err := qemu.CheckGuestArch(id.Arch); err != nil {
		return err
	}
	if id.Arch == "arm64" && id.Boot != "uefi" {
		return exitcode.New(exitcode.Capability, "guest architecture arm64 cannot run here with a %s image (%s): arm64 guests (virt machine) boot UEFI only", id.Boot, ImageLabel(id)).
			WithReason("guest_arch_unsupported").WithNext("use a uefi image for arm64 nodes (barn-repo list shows each image's boot mode)")
	}
	if _, err := e.profile(id.Arch); err != nil {
		return err
	}
	_, _, err := e.Firmware(id)
	return err
}

func (e *realEmulator) Invocation(in LaunchInput) (vmrecord.Invocation, error) {
	p, err := e.profile(in.Image.Arch)
	if err != nil {
		return vmrecord.Invocation{}, err
	}
	code, _, err := e.Firmware(in.Image)
	if err != nil {
		return vmrecord.Invocation{}, err
	}
	return qemu.Invocation(qemu.Input{Node: in.Node, VMUUID: in.VMUUID, Image: in.Image, RootDisk: in.RootDisk, Base: in.Base,
		DataDisks: in.DataDisks, Seed: in.Seed, NVRAM: in.NVRAM, Firmware: code, SSHPort: in.SSHPort,
		Runtime: in.Runtime, SerialLog: in.SerialLog, QEMULog: in.QEMULog, Shares: ShareFDs(in.Node.Shares)}, p)
}

// ShareFDs numbers a node's shares as QEMU inherits them: the i-th share
// at descriptor 3+i. The numbers depend only on the spec, so the argv (and
// its hash, the process identity binding) is the same on every start even
// though the descriptors are opened anew each time.
func ShareFDs(shares []spec.Share) []qemu.ShareFD {
	out := make([]qemu.ShareFD, len(shares))
	for i, s := range shares {
		out[i] = qemu.ShareFD{Tag: s.Tag, FD: 3 + i, Readonly: s.Readonly}
	}
	return out
}

type realMachine struct{ stop vm.StopOptions }

func (r *realMachine) Launch(ctx context.Context, inv vmrecord.Invocation, node, vmUUID string, rt vmrecord.Runtime, files []*os.File) (vmrecord.Process, error) {
	return vm.Launch(ctx, inv, node, vmUUID, rt, files...)
}

func (r *realMachine) Stop(ctx context.Context, n *state.Node) error {
	return vm.Stop(ctx, vm.Target{Node: n.Node, UUID: n.VMUUID, Runtime: n.Runtime, Invocation: n.Invocation, Process: n.Process}, r.stop)
}

func (r *realMachine) Adopt(ctx context.Context, node, vmUUID string, rt vmrecord.Runtime, inv vmrecord.Invocation) (vmrecord.Process, error) {
	return vm.Adopt(ctx, inv, node, vmUUID, rt, vm.LaunchOptions{})
}

func (r *realMachine) Control(ctx context.Context, n *state.Node, command string) error {
	return vm.Control(ctx, target(n), command, r.stop)
}

func (r *realMachine) Hotplug(ctx context.Context, n *state.Node, cpus int, memBytes int64, step func(string)) error {
	return vm.Hotplug(ctx, target(n), cpus, memBytes, r.stop, step)
}

func (r *realMachine) Kill(ctx context.Context, n *state.Node) error {
	return vm.Kill(ctx, target(n), r.stop)
}

func target(n *state.Node) vm.Target {
	return vm.Target{Node: n.Node, UUID: n.VMUUID, Runtime: n.Runtime, Invocation: n.Invocation, Process: n.Process}
}

func (r *realMachine) Audit(ctx context.Context, n *state.Node) Liveness {
	l := vm.Audit(ctx, vm.Target{Node: n.Node, UUID: n.VMUUID, Runtime: n.Runtime, Invocation: n.Invocation, Process: n.Process})
	out := Liveness{Running: l.Running, QMPOK: l.QMP == nil, QMPErr: l.QMP, Detail: l.Detail,
		VMStatus: l.Status, Inactive: l.Runtime == vm.RuntimeInactive, Busy: errors.Is(l.QMP, qmp.ErrBusy), Found: l.Found, Unproven: l.Unproven}
	switch {
	case n.Process == nil:
		out.Verdict = "none"
	case l.Verdict == procid.Dead:
		out.Verdict = "dead"
	case l.Verdict == procid.Ours:
		out.Verdict = "ours"
	case l.Verdict == procid.Foreign:
		out.Verdict = "foreign"
	default:
		out.Verdict = "unknown"
	}
	if errors.Is(l.QMP, qmp.ErrIdentityMismatch) {
		out.QMPErr = exitcode.Wrap(exitcode.Integrity, l.QMP, "QMP identity mismatch").WithReason("qmp_identity_mismatch")
	}
	return out
}

type realImages struct {
	root     *state.Root
	progress io.Writer
}

func (r *realImages) Ensure(ctx context.Context, id imageref.Identity, received func(int64)) (string, error) {
	return ensureImage(ctx, r.root, id, r.progress, received)
}

func (r *realImages) Verify(_ context.Context, id imageref.Identity) (string, error) {
	return verifyCachedBase(r.root, id)
}

type realSeeder struct {
	root *state.Root
	mu   sync.Mutex
	kp   *sshkeys.KeyPair
}

// keys ensures the deployment key pair once per process (seeds are written
// in parallel).
func (s *realSeeder) keys() (sshkeys.KeyPair, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kp != nil {
		return *s.kp, nil
	}
	keysDir, err := s.root.EnsureKeysDir()
	if err != nil {
		return sshkeys.KeyPair{}, err
	}
	kp, err := sshkeys.Ensure(keysDir, false)
	if err != nil {
		return sshkeys.KeyPair{}, err
	}
	s.kp = &kp
	return kp, nil
}

func (s *realSeeder) WriteSeed(ctx context.Context, path string, in SeedInput) error {
	kp, err := s.keys()
	if err != nil {
		return err
	}
	ci := cidata.Input{Deployment: in.Deployment, Node: in.Node, Peers: in.Peers, Generation: in.Generation, PublicKey: kp.Public}
	if in.Node.Control {
		pem, err := kp.PrivateKeyPEM()
		if err != nil {
			return err
		}
		ci.ControlPrivateKey = string(pem)
	}
	files, err := cidata.Render(ci)
	if err != nil {
		return err
	}
	return cidata.WriteISO(path, files)
}

type realNet struct {
	getenv func(string) string
	bridge string
}

func (n *realNet) Preflight(ctx context.Context, cidr string) error {
	_, err := hostnet.PreflightEnv(ctx, n.getenv, cidr, n.bridge)
	return err
}

func (n *realNet) Faults() ([]hostnet.Fault, error) {
	h := hostnet.FromEnv(n.getenv)
	bridge := n.bridge
	if bridge == "" {
		bridge = h.Bridge
	}
	return recordedFaults(h, bridge)
}

func (n *realNet) CheckAddress(ctx context.Context, node spec.Node) (string, func(), error) {
	bridge := n.bridge
	if bridge == "" {
		bridge = hostnet.FromEnv(n.getenv).Bridge
	}
	failed := func(err error) (string, func(), error) {
		return "", nil, exitcode.Wrap(exitcode.Runtime, err, "%s: checking that %s is free on %s", node.Name, node.Address, bridge).
			WithReason("address_check_failed").WithNext("barn-net status")
	}
	release, err := hostnet.LockAttach(ctx, bridge)
	if err != nil {
		return failed(err)
	}
	c, err := hostnet.CheckAddress(ctx, bridge, node.Address, node.MAC.Private, hostnet.Probe{})
	if err != nil {
		release()
		return failed(err)
	}
	if c.Holder != nil {
		release()
		return "", nil, hostnet.AddressInUse(node.Name, bridge, node.MAC.Private, c.Holder)
	}
	if c.ProbeSkipped != nil {
		return fmt.Sprintf("%s: %s's MAC is not on %s; its address was not ARP-probed (%v)", node.Name, node.Name, bridge, c.ProbeSkipped), release, nil
	}
	return "", release, nil
}

// Unlaunchable returns a Manager that can stop, audit and destroy but not
// launch: the QEMU profile could not be detected (err says why), which must
// not keep anyone from stopping or destroying what runs.
func Unlaunchable(root *state.Root, err error, stop vm.StopOptions) *Manager {
	return &Manager{Root: root, Emu: brokenEmulator{err}, VM: &realMachine{stop: stop}}
}

type brokenEmulator struct{ err error }

func (b brokenEmulator) Accel(string) string                                { return "" }
func (b brokenEmulator) PrivateNet() string                                 { return "" }
func (b brokenEmulator) Firmware(imageref.Identity) (string, string, error) { return "", "", b.err }
func (b brokenEmulator) Supports(imageref.Identity) error                   { return b.err }
func (b brokenEmulator) Invocation(LaunchInput) (vmrecord.Invocation, error) {
	return vmrecord.Invocation{}, b.err
}
