package cli

import (
	"strconv"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/human"
	"barn.dev/lib/lifecycle"
	"barn.dev/lib/qemu"
	"barn.dev/lib/state"
	"barn.dev/lib/tool"
	"barn.dev/lib/vm"
)

// lifecycleCommands are apply, start, stop, restart, status, recreate,
// resize, destroy, pause, resume, kill and purge.
type lifecycleCommands struct {
	Apply    applyCmd    `cmd:"" help:"Apply a barn.plan/v1 read from stdin: create and start nodes."`
	Start    startCmd    `cmd:"" help:"Start stopped nodes from applied state."`
	Stop     stopCmd     `cmd:"" help:"Stop running nodes (QMP powerdown, then quit; verified signals only without QMP)."`
	Restart  restartCmd  `cmd:"" help:"Stop, then start nodes from applied state."`
	Status   statusCmd   `cmd:"" aliases:"st" help:"Show applied nodes with a live identity audit; converge interrupted transitions."`
	Recreate recreateCmd `cmd:"" aliases:"rc" help:"Destroy and recreate drifted nodes from a barn.plan/v1 on stdin."`
	Resize   resizeCmd   `cmd:"" aliases:"rs" help:"Apply changed vCPUs, memory and larger root disks in place from a barn.plan/v1 on stdin (stop/start; identity and disks kept)."`
	Destroy  destroyCmd  `cmd:"" aliases:"de" help:"Destroy nodes (all when none are named); persistent disks are retained."`
	Pause    pauseCmd    `cmd:"" help:"Freeze running nodes (QMP stop: a hung machine; its QEMU and network stay)."`
	Resume   resumeCmd   `cmd:"" help:"Continue paused nodes (QMP cont): the same boot, uptime continues."`
	Kill     killCmd     `cmd:"" help:"End nodes' QEMU as a host crash would (SIGKILL through Barn's proven process identity)."`
	Snapshot snapshotCmd `cmd:"" aliases:"snap" help:"Whole-lab snapshots: save, list, restore, delete."`
	Purge    purgeCmd    `cmd:"" help:"Destroy everything including retained disks and keys (images and network are kept); the state root itself goes once only Barn's lock files are left."`
}

// Environment knobs read by the lifecycle commands.
//
//	BARN_STOP_TIMEOUT   graceful powerdown wait of the stop ladder (Go duration, default 2m;
//	                    up to vm.ExitWait more while QEMU provably ends)
//	BARN_READY_TIMEOUT  one node's guest readiness wait (Go duration, default 10m; readiness.go)
//	BARN_JOBS           default of --jobs: nodes worked on at once (1-16, default 4; jobs.go)
//	BARN_SSH_PORT_BASE  first management SSH port to try (default 2222)
//	BARN_READINESS=none TEST-ONLY: skip guest readiness as --no-wait does
//
// Crash injection (BARN_CRASH_AFTER) is not among them: it exists only in
// test binaries, which set CrashHook (see lib/scripttest.CrashAfter).
const (
	envStopTimeout  = "BARN_STOP_TIMEOUT"
	envReadyTimeout = "BARN_READY_TIMEOUT"
	envReadiness    = "BARN_READINESS"
	envPortBase     = "BARN_SSH_PORT_BASE"
)

// CrashHook, when non-nil, turns the command's environment into the
// lifecycle hook called after every durable step. Only test binaries set
// it (to lib/scripttest.CrashAfter); the shipped barn-node leaves it nil,
// so no environment variable can make it kill itself.
var CrashHook func(getenv func(string) string) func(step, node string)

// FirmwareHook, when non-nil, returns the UEFI firmware pairs to probe
// instead of the distro locations (nil from it keeps them). Only test
// binaries set it (to lib/scripttest.Firmware), like CrashHook.
var FirmwareHook func(getenv func(string) string) []qemu.Firmware

// firmwarePairs are the UEFI firmware pairs this command probes; nil means
// the distro locations (qemu.FirmwarePairs).
func firmwarePairs(env *tool.Env) []qemu.Firmware {
	if FirmwareHook == nil {
		return nil
	}
	return FirmwareHook(env.Getenv)
}

// manager opens the state root (creating it when create) and binds the
// lifecycle Manager to the real packages. needProfile makes a missing
// accelerator or emulator an error now (commands that launch); other
// commands (stop, status, destroy) work without one.
func manager(env *tool.Env, create, needProfile bool) (*lifecycle.Manager, error) {
	var root *state.Root
	var err error
	if create {
		root, err = state.Open(env.Getenv)
	} else {
		root, err = state.Inspect(env.Getenv)
	}
	if err != nil {
		return nil, err
	}
	prog := startProgress(env)
	stop := vm.StopOptions{Progress: func(s string) { env.Stderrf("%s", s) }}
	if d, err := durationEnv(env, envStopTimeout, 0); err != nil {
		return nil, err
	} else if d > 0 {
		stop.Graceful = d
	}
	if _, err := durationEnv(env, envReadyTimeout, 0); err != nil {
		return nil, err
	}
	m, err := lifecycle.Real(root, lifecycle.RealOptions{Getenv: env.Getenv, Progress: env.Err, Stop: stop, Firmware: firmwarePairs(env)})
	if err != nil {
		if needProfile {
			return nil, err
		}
		m = lifecycle.Unlaunchable(root, err, stop)
	}
	if v := env.Getenv(envPortBase); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 1024 || p > 65000 {
			return nil, exitcode.New(exitcode.Usage, "%s=%q is not a port between 1024 and 65000", envPortBase, v)
		}
		m.PortBase = p
	}
	m.Log = env.Err
	m.Phase = prog.Set
	m.Bytes = prog.SetBytes
	m.Command = state.CommandLine(append([]string{env.Tool}, env.Args...))
	m.Waiting = func(h state.LockHolder) {
		env.Stderrf("waiting for another barn command: %s (pid %d, since %s)", h.Command, h.PID, h.Started.Local().Format("15:04:05"))
	}
	if CrashHook != nil {
		m.Hook = CrashHook(env.Getenv)
	}
	if p, ok := m.Profile(); ok && p.PrivateNet == "none" {
		env.Stderrf("note: BARN_PRIVATE_NET=none (test-only): nodes get no private NIC")
	}
	return m, nil
}

// durationEnv is the positive Go duration in the environment variable
// name, or def when it is unset; any other value is a usage error.
func durationEnv(env *tool.Env, name string, def time.Duration) (time.Duration, error) {
	v := env.Getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, exitcode.New(exitcode.Usage, "%s=%q is not a positive duration (e.g. 2m, 30s)", name, v)
	}
	return d, nil
}

// bindReadiness binds guest readiness and, with it, the root filesystem
// probe (resize's layout check, a start's growth verification) unless
// disabled; it returns whether they are bound.
func bindReadiness(env *tool.Env, m *lifecycle.Manager, noWait bool) bool {
	if noWait || env.Getenv(envReadiness) == "none" {
		m.Ready, m.Probe = nil, nil
		return false
	}
	m.Ready, m.Probe = readiness(env, m), &rootProbe{root: m.Root}
	return true
}

// emit ends the progress display, writes the result document (a
// barn.result/v1 with the command's elapsed time) and turns its failures into the exit status without a
// second document on stdout.
func emit(env *tool.Env, doc any, err error) error {
	endProgress(env)
	if r, ok := doc.(*lifecycle.Result); ok && !env.Started.IsZero() {
		r.ElapsedMS = max(1, env.Now().Sub(env.Started).Milliseconds())
	}
	if doc != nil {
		if eerr := env.Emit(doc); eerr != nil {
			return eerr
		}
		return tool.Reported(err)
	}
	return err
}

// resultOrNil avoids a typed-nil interface.
func resultOrNil(r *lifecycle.Result) any {
	if r == nil {
		return nil
	}
	return r
}

// startProgress routes the command's stderr through a human.Progress:
// on a terminal a live per-node table (phase, elapsed) with the progress
// lines above it, on a pipe one line per node phase change. emit ends it.
func startProgress(env *tool.Env) *human.Progress {
	if p, ok := env.Err.(*human.Progress); ok {
		return p
	}
	p := human.NewProgress(env.Err, env.ErrIsTerminal, nil)
	env.Err = p
	return p
}

// endProgress leaves the final table and restores stderr.
func endProgress(env *tool.Env) {
	if p, ok := env.Err.(*human.Progress); ok {
		p.Close()
		env.Err = p.Underlying()
	}
}
