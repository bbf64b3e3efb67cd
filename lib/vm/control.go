package vm

import (
	"context"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/qmp"
	"golang.org/x/sys/unix"
)

// Control sends a QMP command without arguments ("stop": the vCPUs halt,
// a hung machine whose devices and sockets stay; "cont": they run on) on
// one session of Barn's monitor that first proves the node's identity and,
// when a process is recorded, that it is Ours. QMP's errors are returned
// as they are (qmp package: unavailable, busy, identity mismatch).
func Control(ctx context.Context, t Target, command string, o StopOptions) error {
	o = o.withDefaults()
	s, err := verifiedSession(ctx, qmp.Monitor{Socket: t.Runtime.BarnQMP, Timeout: o.QMPTimeout}, t)
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Execute(command, nil, nil)
}

// Kill ends t's QEMU as a host crash would: one SIGKILL, sent only to the
// recorded process while procid proves it Ours (pinned by a pidfd and
// re-captured right before the signal, like every signal Barn sends), then
// waits up to o.KillWait for it to be gone (up to ExitWait more while it
// provably ends: awaitKilled). Runtime files stay: the next
// audit proves the VM inactive and removes them. A node without a proven
// live process is conflict node_not_running or process_unverified; nothing
// is sent then.
func Kill(ctx context.Context, t Target, o StopOptions) error {
	o = o.withDefaults()
	if t.Process == nil {
		return exitcode.New(exitcode.Conflict, "%s has no recorded QEMU process identity; Barn signals only a proven process", t.Node).
			WithReason("process_unverified").WithNext("barn-node status " + t.Node)
	}
	sent, err := verifiedSignal(*t.Process, unix.SIGKILL)
	if err != nil {
		return err
	}
	if !sent {
		return exitcode.New(exitcode.Conflict, "%s's recorded QEMU (pid %d) is not running; nothing sent", t.Node, t.Process.PID).
			WithReason("node_not_running").WithNext("barn-node status " + t.Node)
	}
	return awaitKilled(ctx, *t.Process, o, "barn-node status "+t.Node)
}
