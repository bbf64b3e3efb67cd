package lifecycle

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"barn.dev/lib/disk"
	"barn.dev/lib/hostnet"
	"barn.dev/lib/hostshare"
	"barn.dev/lib/imageref"
	"barn.dev/lib/lazyre"
	"barn.dev/lib/spec"
	"barn.dev/lib/state"
	"barn.dev/lib/vmrecord"
)

// LaunchInput is what the emulator needs to build one node's invocation.
type LaunchInput struct {
	Node      spec.Node
	VMUUID    string
	Image     imageref.Identity
	RootDisk  string
	Base      string // the verified base image file RootDisk backs onto
	DataDisks []vmrecord.DataDisk
	Seed      string
	NVRAM     string // "" for bios images
	SSHPort   int
	Runtime   vmrecord.Runtime
	SerialLog string
	QEMULog   string // QEMU's -D log (its stderr once daemonized)
}

// Emulator is the host's QEMU profile: accelerator policy, firmware and the
// pure invocation builder.
type Emulator interface {
	// Accel is "kvm" or "tcg" for guests of arch (recorded in node
	// state, shown by status); "" when they cannot launch.
	Accel(arch string) string
	// PrivateNet is "bridge" or "none" (test-only: no private NIC).
	PrivateNet() string
	// Firmware returns the UEFI code image and the vars template of
	// id's architecture for boot mode "uefi"; ("", "", nil) for "bios";
	// a capability error when the firmware is missing.
	Firmware(id imageref.Identity) (code, varsTemplate string, err error)
	// Supports proves this host can launch id before anything is
	// downloaded or created: its architecture (capability error, reason
	// guest_arch_unsupported) and, for a uefi image, its firmware
	// (firmware_missing).
	Supports(id imageref.Identity) error
	// Invocation builds the typed QEMU command line.
	Invocation(in LaunchInput) (vmrecord.Invocation, error)
}

// Liveness is the VM layer's read-only audit of one node.
type Liveness struct {
	Running bool   // the VM process runs
	QMPOK   bool   // QMP answered with the expected name and UUID
	Verdict string // process tuple verdict: dead, ours, foreign, unknown, none
	QMPErr  error  // why QMP did not prove identity (nil when QMPOK)
	Detail  string
	// Inactive: nothing answers QMP (proven unavailable, not merely an
	// error or busy) and no process evidence is alive: the recorded tuple
	// (if any) is dead or foreign and no process claims the node's UUID or
	// runtime paths. Only then may a node be converged to stopped or its
	// runtime files and disks removed.
	Inactive bool
	// VMStatus is QMP query-status's status when QMP proved the VM
	// ("running", "paused", …).
	VMStatus string
	// Busy: something holds Barn's QMP monitor without answering.
	Busy bool
	// Found is the process the process table shows running the node's
	// recorded invocation when no live recorded tuple proves it.
	Found *vmrecord.Process
	// Unproven lists the PIDs that keep the evidence ambiguous (see
	// vm.Liveness.Unproven).
	Unproven []int
}

// Machine launches, stops and audits QEMU processes with proven identity.
type Machine interface {
	// Launch runs inv; files are inherited by QEMU at descriptors 3, 4, …
	// and must match inv.InheritedFiles (the share directories). The
	// caller closes them after Launch returns.
	Launch(ctx context.Context, inv vmrecord.Invocation, node, vmUUID string, rt vmrecord.Runtime, files []*os.File) (vmrecord.Process, error)
	// Stop and Audit judge the node's recorded runtime, invocation and
	// process tuple (lib/vm Target).
	Stop(ctx context.Context, n *state.Node) error
	Audit(ctx context.Context, n *state.Node) Liveness
	// Adopt proves an interrupted start: QMP identity, then the pidfile's
	// process tuple whose argv hash must match inv.
	Adopt(ctx context.Context, node, vmUUID string, rt vmrecord.Runtime, inv vmrecord.Invocation) (vmrecord.Process, error)
	// Control sends QMP "stop" or "cont" on a session that proves the
	// node's identity (lib/vm Control).
	Control(ctx context.Context, n *state.Node, command string) error
	// Hotplug brings the node's proven running QEMU to cpus vCPUs and
	// memBytes of memory by hot-plug, calling step after each device
	// (lib/vm Hotplug): conflict hotplug_no_headroom or hotplug_refused
	// when it cannot.
	Hotplug(ctx context.Context, n *state.Node, cpus int, memBytes int64, step func(string)) error
	// Kill SIGKILLs the node's proven QEMU and waits for it to be gone
	// (lib/vm Kill).
	Kill(ctx context.Context, n *state.Node) error
}

// Images turns an exact identity into a verified local file.
type Images interface {
	// Ensure returns the verified cached file of id, pulling it when it is
	// missing (a create's base); received, when not nil, gets the count
	// of id's bytes pulled so far as they arrive (a resume's included).
	Ensure(ctx context.Context, id imageref.Identity, received func(n int64)) (path string, err error)
	// Verify re-verifies the cached file of id without pulling anything (a
	// start's base): a damaged or missing file is the integrity error (7)
	// naming it, with the expected and actual size or digest.
	Verify(ctx context.Context, id imageref.Identity) (path string, err error)
}

// SeedInput is what a node's NoCloud seed is rendered from.
type SeedInput struct {
	Deployment spec.Deployment
	Node       spec.Node
	Peers      []spec.Node
	Generation int64
	VMUUID     string
}

// Seeder renders and writes a node's seed ISO to path (atomically).
type Seeder interface {
	WriteSeed(ctx context.Context, path string, in SeedInput) error
}

// Network proves the private network is usable now.
type Network interface {
	Preflight(ctx context.Context, cidr string) error
	// CheckAddress proves nobody on the bridge holds n's private address
	// or MAC before its QEMU joins it: a holder is the resource refusal
	// address_in_use (hostnet.AddressInUse). note says what was not
	// checked (the ARP probe without CAP_NET_RAW); "" when all was. On
	// success it holds the host-wide attach lock (hostnet.LockAttach)
	// until release, which the caller calls once the node's QEMU runs.
	CheckAddress(ctx context.Context, n spec.Node) (note string, release func(), err error)
	// Faults returns the network faults barn-net recorded on this
	// profile's bridge (its fault record, read-only); an unreadable or
	// damaged record is an error, never "no fault".
	Faults() ([]hostnet.Fault, error)
}

// Readiness waits for a launched guest to finish its setup.
type Readiness interface {
	WaitReady(ctx context.Context, n *state.Node) (warnings []Warning, repairs []string, err error)
}

// Hook is called after each durable step ("journal", "root-overlay",
// "data-disk", "seed", "nvram", "prepared", "committed", "starting",
// "launched" (QEMU runs, its tuple not yet recorded), "running",
// "destroying", "stopped", "preserved", "artifacts-removed") and at the
// gaps of a write-ahead create: "create-<kind>" once an artifact's intent
// is journaled and before it exists, "staged-<kind>" once its staging
// file's identity is journaled and before it is linked, "created-<kind>"
// once it is linked and before the journal records it as completed, "reattach-data-disk" and
// "reattached-data-disk" likewise around a retained disk's move, and
// "released" between releasing reattached disks' markers and removing the
// journal. The file steps are lib/nodedir's (nodedir.Hook), handed on
// here. Tests use it for crash injection; production leaves it nil.
type Hook func(step, node string)

// Manager runs lifecycle operations. Root, Emu, VM, Images and Seeds are
// required for operations that create or start nodes; Net nil skips the
// network preflight; Ready nil skips readiness (as --no-wait does).
type Manager struct {
	Root   *state.Root
	Emu    Emulator
	VM     Machine
	Images Images
	Seeds  Seeder
	Net    Network
	Ready  Readiness
	Disk   disk.Tool
	// Probe reads a running guest's root filesystem: resize refuses a
	// root layout the guest cannot grow with it, and every start that
	// launches a node and waits for readiness verifies that the root
	// fills its root disk (verifyRoot); nil reads nothing (as --no-wait).
	Probe RootProbe

	Log io.Writer // progress lines; nil discards
	// Phase receives each node's progress: every durable step (as Hook
	// does), readiness, and with done set the node's outcome in the
	// result (its action, or "failed at STAGE"). nil discards.
	Phase func(node, phase string, done bool)
	// Bytes receives the bytes moved so far for a node in this command:
	// the pull of the base image it waits on (every node of the command
	// waiting on the same image sees the same count). nil discards.
	Bytes       func(node string, n int64)
	Hook        Hook
	Command     string // recorded as the lock holder's command
	Waiting     func(state.LockHolder)
	Concurrency int // nodes worked on at once; 0 means DefaultJobs, capped at MaxJobs
	// Hotplug lets Resize hot-plug vCPU and memory increases into a
	// running node with headroom instead of stopping and starting it
	// (barn-node resize sets it unless --no-hotplug; the zero Manager
	// stops and starts).
	Hotplug  bool
	PortBase int // first management SSH port; 0 means 2222
	// PortFree reports whether 127.0.0.1:port can be bound now; nil binds.
	PortFree func(port int) bool
	Now      func() time.Time
	// ShareOptions returns the host-side share checks' environment; nil
	// means hostshare.DefaultOptions(Root.Dir) (the caller's euid, this
	// host's OS). Tests inject another owner or OS.
	ShareOptions func() hostshare.Options

	opOnce    sync.Once
	opID      string // operation id of this Manager's events
	eventsOff bool   // set once purge removed the event log

	basesMu sync.Mutex
	bases   map[string]*baseCheck // base images verified by this command (verifyBase)
	pulls   map[string][]string   // base key → nodes waiting in ensureBase (under basesMu)
}

func (m *Manager) shareOptions() hostshare.Options {
	if m.ShareOptions != nil {
		return m.ShareOptions()
	}
	return hostshare.DefaultOptions(m.Root.Dir)
}

// checkShares proves every share source of n is usable now (opened once
// and closed): see package hostshare.
func (m *Manager) checkShares(n *spec.Node) error {
	return hostshare.CheckAll(n.Name, n.Shares, m.shareOptions())
}

func (m *Manager) now() time.Time {
	if m.Now != nil {
		return m.Now().UTC()
	}
	return time.Now().UTC()
}

// hook records a durable step in the deployment event log and then calls
// the test hook. An event that cannot be written is only noted on the
// progress stream: the event log is diagnostics, never a reason to fail a
// lifecycle step that already happened.
func (m *Manager) hook(step, node string) {
	m.phase(node, step)
	m.event("info", node, step, "")
	if m.Hook != nil {
		m.Hook(step, node)
	}
}

// phase reports node's progress to Phase.
func (m *Manager) phase(node, phase string) {
	if m.Phase != nil {
		m.Phase(node, phase, false)
	}
}

// newResult is a result whose nodes report their outcome to Phase.
func (m *Manager) newResult(command string) *Result {
	r := newResult(command)
	if m.Phase != nil {
		r.done = func(node, outcome string) { m.Phase(node, outcome, true) }
	}
	return r
}

// gap calls the test hook at a crash window that is not itself a durable
// step (nothing is logged).
func (m *Manager) gap(step, node string) {
	if m.Hook != nil {
		m.Hook(step, node)
	}
}

// event appends one record for this operation (one operation id per
// Manager) to <BARN_HOME>/events.jsonl.
func (m *Manager) event(level, node, phase, message string) {
	if m.Root == nil || m.eventsOff {
		return
	}
	m.opOnce.Do(func() { m.opID = uuid.NewString() })
	action := "barn-node"
	if f := strings.Fields(m.Command); len(f) > 1 {
		action = f[1]
	}
	if !eventName.MatchString(action) {
		action = "barn-node"
	}
	if message == "" {
		message = fmt.Sprintf("%s: %s", node, phase)
	}
	err := m.Root.AppendEvent(state.Event{Level: level, Node: node, OperationID: m.opID,
		Action: action, Phase: phase, Message: message})
	if err != nil {
		m.logf("note: event log not written: %v", err)
	}
}

// eventName is the event log's rule for node and action names.
var eventName = lazyre.New(`^[a-z0-9][a-z0-9_.-]{0,63}$`)

func (m *Manager) logf(format string, args ...any) {
	if m.Log != nil {
		writeLine(m.Log, format, args...)
	}
}

// DefaultJobs and MaxJobs bound how many nodes a lifecycle operation works
// on at once (barn-node --jobs, BARN_JOBS). Four keeps a 2-core TCG host
// responsive while image copies, seeds and boots overlap; sixteen is past
// the point where more QEMU processes only compete for the same cores and
// disk.
const (
	DefaultJobs = 4
	MaxJobs     = 16
)

func (m *Manager) concurrency(n int) int {
	c := m.Concurrency
	if c <= 0 {
		c = DefaultJobs
	}
	c = min(c, MaxJobs)
	if n < c {
		c = n
	}
	if c < 1 {
		c = 1
	}
	return c
}
