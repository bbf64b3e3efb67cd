package vm

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/qmp"
	"barn.dev/lib/vmrecord"
)

// HotplugCPU is one vCPU slot as QMP query-hotpluggable-cpus lists it:
// the device type to plug, its topology properties (socket-id, core-id,
// thread-id, …) and, once plugged, its QOM path.
type HotplugCPU struct {
	Type    string         `json:"type"`
	Props   map[string]int `json:"props"`
	QOMPath string         `json:"qom-path,omitempty"`
}

type memorySummary struct {
	Base    int64 `json:"base-memory"`
	Plugged int64 `json:"plugged-memory"`
}

type memoryDevice struct {
	Type string `json:"type"`
	Data struct {
		ID   string `json:"id"`
		Size int64  `json:"size"`
	} `json:"data"`
}

type qomProperty struct {
	Name string `json:"name"`
}

// Hotplug brings t's running QEMU to cpus vCPUs and memBytes of memory by
// hot-plug, on one session of Barn's monitor that first proves the node's
// identity (and, with a recorded process, that it is Ours): each missing
// vCPU is device_add'ed with the type and topology QEMU lists for its
// slot, and the missing memory is one memory-backend-ram object
// ("barn-mem-<k>") plugged as one pc-dimm ("barn-dimm-<k>"), k being the
// number of memory devices already plugged. It is idempotent: what QEMU
// already has is not plugged again, and a backend left without its DIMM
// by an interrupted hot-plug is deleted and added anew. step, when not
// nil, is called after each device ("cpu-plugged", "memory-backend",
// "memory-plugged").
//
// Before anything is plugged it proves the target is reachable: fewer
// vCPU slots than cpus, fewer vCPUs or less memory than QEMU has now, no
// free memory slot, or no room below maxmem is a conflict, reason
// hotplug_no_headroom (the caller stops and starts the node instead).
// QMP's own errors are returned as they are.
func Hotplug(ctx context.Context, t Target, cpus int, memBytes int64, o StopOptions, step func(string)) error {
	o = o.withDefaults()
	s, err := verifiedSession(ctx, qmp.Monitor{Socket: t.Runtime.BarnQMP, Timeout: o.QMPTimeout}, t)
	if err != nil {
		return err
	}
	defer s.Close()
	if step == nil {
		step = func(string) {}
	}
	missing, err := missingCPUs(s, t.Node, cpus)
	if err != nil {
		return err
	}
	var sum memorySummary
	if err := s.Execute("query-memory-size-summary", nil, &sum); err != nil {
		return err
	}
	var devs []memoryDevice
	if err := s.Execute("query-memory-devices", nil, &devs); err != nil {
		return err
	}
	have := sum.Base + sum.Plugged
	if memBytes < have {
		return noHeadroom(t.Node, "its QEMU has %d bytes of memory, more than %d; memory is never unplugged", have, memBytes)
	}
	for _, c := range missing {
		args := map[string]any{"driver": c.Type, "id": cpuID(c)}
		for k, v := range c.Props {
			args[k] = v
		}
		if err := s.Execute("device_add", args, nil); err != nil {
			return hotplugFailed(ctx, t, o, "vCPU "+cpuID(c), err)
		}
		step("cpu-plugged")
	}
	if memBytes == have {
		return nil
	}
	return plugMemory(ctx, s, t, o, len(devs), memBytes-have, step)
}

// missingCPUs lists, in topology order, the unplugged vCPU slots that
// bring QEMU to want vCPUs (conflict hotplug_no_headroom when it has
// more, or fewer slots).
func missingCPUs(s *qmp.Session, node string, want int) ([]HotplugCPU, error) {
	var slots []HotplugCPU
	if err := s.Execute("query-hotpluggable-cpus", nil, &slots); err != nil {
		return nil, err
	}
	var free []HotplugCPU
	for _, c := range slots {
		if c.QOMPath == "" {
			free = append(free, c)
		}
	}
	present := len(slots) - len(free)
	switch {
	case want < present:
		return nil, noHeadroom(node, "its QEMU runs %d vCPUs, more than %d; vCPUs are never unplugged", present, want)
	case want > len(slots):
		return nil, noHeadroom(node, "its QEMU has %d vCPU slots (maxcpus), fewer than %d", len(slots), want)
	}
	sort.Slice(free, func(i, j int) bool { return cpuID(free[i]) < cpuID(free[j]) })
	return free[:want-present], nil
}

// cpuID is the device id of a vCPU slot: barn-cpu-s<socket>-c<core>-t<thread>.
func cpuID(c HotplugCPU) string {
	return fmt.Sprintf("barn-cpu-s%03d-c%03d-t%03d", c.Props["socket-id"], c.Props["core-id"], c.Props["thread-id"])
}

// plugMemory adds one backend of size bytes and plugs it as DIMM k.
func plugMemory(ctx context.Context, s *qmp.Session, t Target, o StopOptions, k int, size int64, step func(string)) error {
	backend, dimm := fmt.Sprintf("barn-mem-%d", k), fmt.Sprintf("barn-dimm-%d", k)
	var objs []qomProperty
	if err := s.Execute("qom-list", map[string]any{"path": "/objects"}, &objs); err != nil {
		return err
	}
	for _, obj := range objs {
		if obj.Name == backend { // left by an interrupted hot-plug: no DIMM uses it
			if err := s.Execute("object-del", map[string]any{"id": backend}, nil); err != nil {
				return hotplugFailed(ctx, t, o, "stale memory backend "+backend, err)
			}
		}
	}
	if err := s.Execute("object-add", map[string]any{"qom-type": "memory-backend-ram", "id": backend, "size": size}, nil); err != nil {
		return hotplugFailed(ctx, t, o, "memory backend "+backend, err)
	}
	step("memory-backend")
	if err := s.Execute("device_add", map[string]any{"driver": "pc-dimm", "id": dimm, "memdev": backend}, nil); err != nil {
		s.Execute("object-del", map[string]any{"id": backend}, nil) // best effort: an orphan is deleted next time
		return hotplugFailed(ctx, t, o, "DIMM "+dimm, err)
	}
	step("memory-plugged")
	return nil
}

func noHeadroom(node, format string, args ...any) error {
	return exitcode.New(exitcode.Conflict, node+": cannot hot-plug: "+format, args...).WithReason("hotplug_no_headroom")
}

// hotplugFailed: QEMU refused to plug what (conflict, hotplug_refused:
// no free slot, no room below maxmem, a firmware that did not enable
// vCPU hot-plug). A monitor lost mid-plug is otherwise ambiguous: when
// the recorded process is gone within one QMP timeout (an exiting
// process closes its sockets before it is reaped), it is said (runtime,
// hotplug_qemu_exited), quoting the end of QEMU's log (the -D file of
// the invocation, its stderr once daemonized) and pointing at it; other
// QMP transport errors stay as they are.
func hotplugFailed(ctx context.Context, t Target, o StopOptions, what string, err error) error {
	var qe *qmp.Error
	if errors.As(err, &qe) {
		return exitcode.Wrap(exitcode.Conflict, err, "%s: QEMU refused to hot-plug %s", t.Node, what).WithReason("hotplug_refused")
	}
	if p := t.Process; p != nil && errors.Is(err, qmp.ErrUnavailable) && waitGone(ctx, processGone(*p), o.QMPTimeout, o.Poll) {
		return exitcode.Wrap(exitcode.Runtime, err, "%s: QEMU (pid %d) exited while hot-plugging %s%s", t.Node, p.PID, what, lastWords(t.Invocation)).
			WithReason("hotplug_qemu_exited").WithNext("barn-node logs --source qemu " + t.Node + "; barn-node start " + t.Node)
	}
	return err
}

// lastWords is "; its log <file> ends: <line>" with the last line of
// the -D file inv names (QEMU's stderr once daemonized), "; its log
// <file> is empty", or "" when inv names none.
func lastWords(inv vmrecord.Invocation) string {
	p := qemuLogPath(inv)
	if p == "" {
		return ""
	}
	tail := stderrTail(p)
	if tail == "" {
		return "; its log " + p + " is empty"
	}
	return fmt.Sprintf("; its log %s ends: %s", p, tail[strings.LastIndex(tail, "\n")+1:])
}
