package lifecycle

import (
	"context"
	"fmt"
	"slices"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/hostshare"
	"barn.dev/lib/state"
	"barn.dev/lib/vm"
)

// Runtime values reported by status.
const (
	RuntimeRunning  = "running"
	RuntimeInactive = "inactive"
	RuntimeUnknown  = "unknown"
	RuntimeAbsent   = "absent"
)

// observation is what a live audit of one node proved.
type observation struct {
	Runtime   string
	VMStatus  string // QMP query-status's status when QMP proved the VM ("paused": barn-node pause)
	Converged string // what was changed in state, "" when nothing
	Err       error  // ambiguous or contradictory evidence: act on nothing
}

// observe audits n's live identity and, when act is true (the caller holds
// the deployment lock), converges what the evidence proves:
//   - running/stopping with QMP proof → running (an interrupted stop that
//     left the VM running is resumed as running);
//   - starting with QMP proof → adopted (process tuple captured);
//   - a dead runtime, or a recorded PID proven foreign, with no process
//     claiming the node in the process table → stopped, runtime files
//     removed (a missing pidfile or socket alone proves nothing);
//   - no live recorded tuple but the process table shows the node's exact
//     invocation running → that process is adopted (its tuple recorded) and
//     stop is the next step: QMP does not answer it;
//   - a QMP identity mismatch, a busy monitor, ambiguous process evidence,
//     or a live process without QMP → an error naming the command that
//     settles it, never one that leads back here.
func (m *Manager) observe(ctx context.Context, n *state.Node, act bool) observation {
	if n.Phase == state.Destroying {
		return observation{Runtime: RuntimeUnknown, Err: exitcode.New(exitcode.Conflict, "%s: an interrupted destroy is pending", n.Node).
			WithReason("interrupted_transition").WithNext("barn-node destroy " + n.Node + " --force")}
	}
	l := m.VM.Audit(ctx, n)
	if mismatch(l) {
		return observation{Runtime: RuntimeUnknown, Err: exitcode.New(exitcode.Integrity, "%s: QMP answers with another identity (%v); nothing was sent", n.Node, l.QMPErr).
			WithReason("identity_mismatch").WithNext("stop the VM that answers on " + n.Runtime.QMP + " (it is not " + n.Node + "), then barn-node status " + n.Node)}
	}
	switch {
	case l.QMPOK && (l.Verdict == "ours" || l.Verdict == "none" && n.Phase != state.Running):
		if obs, ok := m.provenRunning(ctx, n, l, act); ok {
			obs.VMStatus = l.VMStatus
			return obs
		}
	case l.QMPOK:
		return observation{Runtime: RuntimeUnknown, Err: exitcode.New(exitcode.Integrity, "%s: QMP proves the VM but the recorded process does not match (%s)", n.Node, l.Verdict).
			WithReason("process_mismatch").WithNext(processMismatchHint(n.Node, n.Runtime.QMP))}
	case l.Inactive:
		return m.provenStopped(ctx, n, l, act)
	case l.Busy && (l.Verdict == "ours" || l.Found != nil):
		return observation{Runtime: RuntimeRunning, Err: vm.QMPBusy(n.Node, l.QMPErr, "barn-node status "+n.Node)}
	case l.Busy:
		return observation{Runtime: RuntimeUnknown, Err: vm.QMPBusy(n.Node, l.QMPErr, "barn-node status "+n.Node)}
	case l.Verdict == "ours":
		return observation{Runtime: RuntimeRunning, Err: qmpSilent(n, l)}
	case l.Found != nil:
		return m.adoptFound(n, l, act)
	case len(l.Unproven) > 0:
		return observation{Runtime: RuntimeUnknown, Err: exitcode.New(exitcode.Conflict, "%s: cannot prove whether the VM runs (%s)", n.Node, l.Detail).
			WithReason("process_unverified").WithNext(vm.UnprovenNext(n.Node, l.Unproven))}
	}
	return observation{Runtime: RuntimeUnknown, Err: exitcode.New(exitcode.Conflict, "%s: cannot prove whether the VM runs (%s; %v)", n.Node, l.Detail, l.QMPErr).
		WithReason("interrupted_transition").WithNext("barn-node stop " + n.Node)}
}

// provenRunning is observe for a VM QMP proves running: a recorded
// running phase stands; an interrupted transition (starting, stopping,
// prepared, stopped) is adopted as running when act. false for any other
// phase (the evidence then settles nothing).
func (m *Manager) provenRunning(ctx context.Context, n *state.Node, l Liveness, act bool) (observation, bool) {
	switch n.Phase {
	case state.Running:
		return observation{Runtime: RuntimeRunning}, true
	case state.Starting, state.Stopping, state.Prepared, state.Stopped:
	default:
		return observation{}, false
	}
	if !act {
		return observation{Runtime: RuntimeRunning, Err: interrupted(n)}, true
	}
	if n.Process == nil || l.Verdict != "ours" {
		proc, err := m.VM.Adopt(ctx, n.Node, n.VMUUID, n.Runtime, n.Invocation)
		if err != nil {
			return observation{Runtime: RuntimeRunning, Err: exitcode.As(err).WithReason("interrupted_transition").WithNext("barn-node stop " + n.Node)}, true
		}
		n.Process = &proc
	}
	was := n.Phase
	if err := m.setPhase(n, state.Running); err != nil {
		return observation{Runtime: RuntimeRunning, Err: err}, true
	}
	return observation{Runtime: RuntimeRunning, Converged: fmt.Sprintf("%s: %s was interrupted but QMP proves the VM runs; adopted as running", n.Node, was)}, true
}

// provenStopped is observe for a VM proven inactive: a live phase is
// converged to stopped (runtime files removed) when act.
func (m *Manager) provenStopped(ctx context.Context, n *state.Node, l Liveness, act bool) observation {
	if n.Phase == state.Stopped || n.Phase == state.Prepared {
		return observation{Runtime: RuntimeInactive}
	}
	if !act {
		return observation{Runtime: RuntimeInactive, Err: interrupted(n)}
	}
	was := n.Phase
	if err := m.cleanRuntime(ctx, n); err != nil {
		return observation{Runtime: RuntimeUnknown, Err: err}
	}
	n.Process = nil
	if err := m.setPhase(n, state.Stopped); err != nil {
		return observation{Runtime: RuntimeInactive, Err: err}
	}
	why := "the VM is not running"
	if l.Verdict == "foreign" {
		why = "the recorded PID now belongs to an unrelated process (never signalled)"
	}
	return observation{Runtime: RuntimeInactive, Converged: fmt.Sprintf("%s: was %s but %s; now stopped", n.Node, was, why)}
}

// adoptFound is observe for a QEMU the process table shows running the
// node's invocation while QMP is silent: recorded as the node's process
// when act; stop is the next step.
func (m *Manager) adoptFound(n *state.Node, l Liveness, act bool) observation {
	var converged string
	if act {
		was := n.Phase
		n.Process = l.Found
		if n.Phase == state.Stopped || n.Phase == state.Prepared {
			n.Phase = state.Running // a recorded process needs a live phase
		}
		if err := m.setPhase(n, n.Phase); err != nil {
			return observation{Runtime: RuntimeRunning, Err: err}
		}
		converged = fmt.Sprintf("%s: %s with no live recorded process, but the process table shows pid %d running its invocation; adopted", n.Node, was, l.Found.PID)
	}
	return observation{Runtime: RuntimeRunning, Converged: converged, Err: qmpSilent(n, l)}
}

// processMismatchHint: QMP proves the VM but not as the recorded process,
// so no Barn command may signal or delete it (stop and recreate refuse
// the same way); the user must stop it.
func processMismatchHint(node, qmpSocket string) string {
	return "stop " + node + "'s QEMU yourself (QMP at " + qmpSocket + " proves it, its process is not the recorded one), then barn-node status " + node
}

// qmpSilent is the error of a node whose QEMU process is proven to run
// while QMP does not answer: the stop ladder's verified signals settle it.
func qmpSilent(n *state.Node, l Liveness) error {
	return exitcode.New(exitcode.Conflict, "%s: the QEMU process runs but QMP does not answer (%v)", n.Node, l.QMPErr).
		WithReason("qmp_unavailable").WithNext("barn-node stop " + n.Node)
}

func mismatch(l Liveness) bool {
	return !l.QMPOK && l.QMPErr != nil && exitcode.ClassOf(l.QMPErr) == exitcode.Integrity
}

func interrupted(n *state.Node) error {
	return exitcode.New(exitcode.Conflict, "%s: an interrupted %s transition is recorded", n.Node, n.Phase).
		WithReason("interrupted_transition").WithNext("barn-node status " + n.Node)
}

func (m *Manager) setPhase(n *state.Node, p state.Phase) error {
	return m.nodeDirs().SetPhase(n, p)
}

// cleanRuntime removes the runtime QMP socket and pidfile of a VM proven
// not running. It refuses (conflict, reason runtime_busy) a socket that
// something still listens on or a pidfile naming a live process: those are
// evidence, never debris.
func (m *Manager) cleanRuntime(ctx context.Context, n *state.Node) error {
	if n.Runtime.QMP == "" && n.Runtime.Pidfile == "" {
		return nil
	}
	return vm.CleanupRuntime(ctx, n.Runtime)
}

// launch runs a prepared or stopped node: a port taken by another process
// is replaced (a repair), the base image is re-verified (verifyBase),
// phase starting is recorded before QEMU runs and running with the
// process tuple after QMP proved the identity.
func (m *Manager) launch(ctx context.Context, n *state.Node, alloc *portAllocator) ([]string, error) {
	repairs, err := m.rebuildInvocation(ctx, n, alloc)
	if err != nil {
		return nil, err
	}
	if _, err := m.Root.EnsureNodeRuntime(n.Node); err != nil {
		return repairs, err
	}
	// Share sources are opened anew on every start (descriptors do not
	// persist) and checked on the open descriptor; a missing or unsafe
	// source fails this node before anything is recorded.
	files, err := hostshare.OpenAll(n.Node, n.Spec.Shares, m.shareOptions())
	if err != nil {
		return repairs, err
	}
	defer hostshare.CloseAll(files) // QEMU holds its own copies
	if len(files) != len(n.Invocation.InheritedFiles) {
		return repairs, exitcode.New(exitcode.Integrity, "%s: the recorded invocation inherits %d descriptors but the node has %d shares",
			n.Node, len(n.Invocation.InheritedFiles), len(files)).WithReason("invocation_shares_mismatch").WithNext(recreateAgain(m.appliedSource(), nil, []string{n.Node}))
	}
	release, err := m.checkAddress(ctx, n)
	if err != nil {
		return repairs, err
	}
	defer release() // once QEMU runs (or failed to), it holds the MAC in its argv
	n.Process = nil
	// The serial console and QEMU's log, which QEMU opens: created by
	// Barn and recorded first, so destroy deletes them by this record,
	// never by their names.
	if err := m.nodeDirs().RecordSerialLog(n); err != nil {
		return repairs, err
	}
	if err := m.nodeDirs().RecordQEMULog(n); err != nil {
		return repairs, err
	}
	if err := m.setPhase(n, state.Starting); err != nil {
		return repairs, err
	}
	m.hook("starting", n.Node)
	m.logf("%s: launching QEMU (%s)", n.Node, n.Accel)
	proc, err := m.VM.Launch(ctx, n.Invocation, n.Node, n.VMUUID, n.Runtime, files)
	if err != nil {
		m.launchFailed(ctx, n)
		return repairs, err
	}
	m.hook("launched", n.Node) // QEMU runs; its tuple is not recorded yet
	n.Process = &proc
	if err := m.setPhase(n, state.Running); err != nil {
		return repairs, err
	}
	m.hook("running", n.Node)
	return repairs, nil
}

// checkAddress refuses to attach n to the bridge while anyone else holds
// its private address or MAC there (another lab from the same inventory,
// a host): see hostnet.CheckAddress. It returns the attach lock's release
// (a no-op without a private NIC, when nothing is checked).
func (m *Manager) checkAddress(ctx context.Context, n *state.Node) (release func(), err error) {
	if m.Net == nil || m.Emu.PrivateNet() == "none" {
		return func() {}, nil
	}
	note, release, err := m.Net.CheckAddress(ctx, n.Spec)
	if note != "" {
		m.logf("note: %s", note)
	}
	return release, err
}

// restartable proves, before a running node n is stopped to start again
// (restart, a resize that is not a hot-plug), what its next launch needs:
// the emulator and firmware of its image (Emulator.Supports; for a
// foreign guest the emulator is a package of its own), the verified base
// image and the disk headers (qemu-img: checkDiskHeaders) and its share
// sources, so a node that could not start again keeps running. The base
// is verified once per command (verifyBase), so the launch does not
// repeat it.
func (m *Manager) restartable(ctx context.Context, n *state.Node) error {
	if err := m.Emu.Supports(n.Image); err != nil {
		return err
	}
	base, err := m.verifyBase(ctx, n.Image)
	if err != nil {
		return err
	}
	if err := m.checkDiskHeaders(ctx, n, base); err != nil {
		return err
	}
	return m.checkShares(&n.Spec)
}

// rebuildInvocation re-verifies what n boots from and builds its QEMU
// invocation anew into n.Invocation: the base image's bytes (once per
// command for a base several nodes share), the disk headers (the root
// overlay still backs onto exactly that file), and a free management
// port (a taken one is replaced: a repair). The recorded invocation is
// never replayed: only one built now from verified inputs passes the base
// as an explicit backing node, so QEMU never follows a header.
func (m *Manager) rebuildInvocation(ctx context.Context, n *state.Node, alloc *portAllocator) ([]string, error) {
	base, err := m.verifyBase(ctx, n.Image)
	if err != nil {
		return nil, err
	}
	if err := m.checkDiskHeaders(ctx, n, base); err != nil {
		return nil, err
	}
	var repairs []string
	if n.SSHPort == 0 || !m.portFree(n.SSHPort) {
		old := n.SSHPort
		port, err := alloc.next()
		if err != nil {
			return nil, err
		}
		n.SSHPort = port
		repairs = append(repairs, fmt.Sprintf("management SSH port %d was taken by another process; moved to %d", old, port))
	}
	inv, err := m.Emu.Invocation(m.launchInput(n, base))
	if err != nil {
		return nil, err
	}
	was := inv
	if h := n.Hotplug; h != nil { // the recorded invocation is the one launched before a hot-plug
		in := m.launchInput(n, base)
		in.Node.CPUs, in.Node.MemoryBytes = h.LaunchCPUs, h.LaunchMemoryBytes
		if was, err = m.Emu.Invocation(in); err != nil {
			return nil, err
		}
	}
	if len(repairs) == 0 && len(n.Invocation.Args) > 0 && (was.Binary != n.Invocation.Binary || !slices.Equal(was.Args, n.Invocation.Args)) {
		repairs = append(repairs, "the recorded QEMU invocation was not this Barn's; rebuilt it")
	}
	n.Invocation, n.Hotplug = inv, nil
	return repairs, nil
}

// launchFailed records what a failed launch left: it may leave QEMU
// running (an identity mismatch is never touched; a refused cleanup says
// so). Stopped is recorded only when an audit proves nothing runs;
// otherwise the node stays starting for status to settle on proof.
func (m *Manager) launchFailed(ctx context.Context, n *state.Node) {
	if l := m.VM.Audit(ctx, n); l.Inactive { // n.Process is nil: none was recorded
		if werr := m.setPhase(n, state.Stopped); werr != nil {
			m.logf("%s: recording stopped after a failed launch: %v", n.Node, werr)
		}
	} else {
		m.logf("%s: launch failed and the VM may still run (%s); left as starting for barn-node status", n.Node, l.Detail)
	}
}

// checkDiskHeaders refuses to start n when a disk header names a file
// Barn did not put there: the root overlay must back onto base, the
// verified base image, in qcow2, and name no external data file
// (integrity, reason backing_chain_mismatch); each data disk must name
// neither a backing file nor a data file (integrity, reason
// disk_header_mismatch). QEMU opens what a header names, so this is the
// last check before the invocation is built.
func (m *Manager) checkDiskHeaders(ctx context.Context, n *state.Node, base string) error {
	_, err := m.Disk.CheckBacking(ctx, n.RootDisk, base, "qcow2")
	if e := exitcode.As(err); e != nil && e.Reason == "backing_chain_mismatch" {
		return exitcode.Wrap(exitcode.Integrity, err, "%s: its root disk no longer backs onto the verified base image; not starting it", n.Node).
			WithReason("backing_chain_mismatch").
			WithNext(fmt.Sprintf("qemu-img rebase -u -F qcow2 -b %s %s   # only if you rewrote its backing file yourself; then barn-node start %s", base, n.RootDisk, n.Node))
	}
	if err := headerRefusal(n, "root disk", n.RootDisk, err); err != nil {
		return err
	}
	for _, d := range n.DataDisks {
		_, err := m.Disk.CheckStandalone(ctx, d.Path)
		if err := headerRefusal(n, "data disk "+d.Name, d.Path, err); err != nil {
			return err
		}
	}
	return nil
}

// headerRefusal words a disk_header_mismatch from lib/disk for node n;
// other errors pass through unchanged.
func headerRefusal(n *state.Node, what, path string, err error) error {
	if e := exitcode.As(err); e != nil && e.Reason == "disk_header_mismatch" {
		return exitcode.Wrap(exitcode.Integrity, err, "%s: its %s's header names a file Barn did not put there; not starting it", n.Node, what).
			WithReason("disk_header_mismatch").
			WithNext(fmt.Sprintf("qemu-img info %s   # see what it names; Barn will not attach it as it is", path))
	}
	return err
}

func (m *Manager) launchInput(n *state.Node, base string) LaunchInput {
	return LaunchInput{Node: n.Spec, VMUUID: n.VMUUID, Image: n.Image, RootDisk: n.RootDisk, Base: base, DataDisks: n.DataDisks,
		Seed: n.Seed, NVRAM: n.NVRAM, SSHPort: n.SSHPort, Runtime: n.Runtime, SerialLog: n.SerialLog,
		QEMULog: m.Root.NodeFile(n.Node, state.QEMULogName)}
}

// stop runs the VM layer's verified stop ladder for n and records stopped.
// On failure the previous phase is restored.
func (m *Manager) stop(ctx context.Context, n *state.Node) error {
	switch n.Phase {
	case state.Stopped:
		return nil
	case state.Prepared:
		return m.setPhase(n, state.Stopped)
	}
	prev := n.Phase
	if err := m.setPhase(n, state.Stopping); err != nil {
		return err
	}
	m.hook("stopping", n.Node)
	m.logf("%s: stopping (QMP system_powerdown, then quit; verified signals only without QMP)", n.Node)
	if err := m.VM.Stop(ctx, n); err != nil {
		if werr := m.setPhase(n, prev); werr != nil {
			m.logf("%s: restoring phase %s: %v", n.Node, prev, werr)
		}
		return err
	}
	n.Process = nil
	if err := m.cleanRuntime(ctx, n); err != nil {
		return err
	}
	if err := m.setPhase(n, state.Stopped); err != nil {
		return err
	}
	m.hook("stopped", n.Node)
	return nil
}

// waitReady runs readiness for n unless skipped.
func (m *Manager) waitReady(ctx context.Context, n *state.Node, wait bool, nr *NodeResult) error {
	if !wait || m.Ready == nil {
		return nil
	}
	m.phase(n.Node, "waiting for the guest")
	warnings, repairs, err := m.Ready.WaitReady(ctx, n)
	nr.Warnings = append(nr.Warnings, warnings...)
	nr.Repairs = append(nr.Repairs, repairs...)
	nr.Ready = err == nil
	return err
}
