package fakeqemu

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

// hotplug is the fake's hot-plug state: the vCPU sockets plugged beyond
// -smp N (one vCPU per socket, as QEMU 7.2 lays out -smp N,maxcpus=M),
// the memory backends object-add created, and the pc-dimms plugged.
type hotplug struct {
	cpus     map[int]string // socket-id → device id, for sockets ≥ N
	backends map[string]int64
	dimms    []dimm
}

type dimm struct {
	id, memdev string
	size       int64
}

type hotplugArgs struct {
	Driver   string `json:"driver"`
	ID       string `json:"id"`
	SocketID *int   `json:"socket-id"`
	CoreID   *int   `json:"core-id"`
	ThreadID *int   `json:"thread-id"`
	Memdev   string `json:"memdev"`
	QOMType  string `json:"qom-type"`
	Size     int64  `json:"size"`
}

const fakeCPUType = "max-x86_64-cpu"

// runHotplug answers query-hotpluggable-cpus, query-memory-size-summary,
// query-memory-devices, qom-list (of /objects), object-add, object-del and device_add of a vCPU
// or a pc-dimm, with QEMU's refusals; ok is false for any other command.
// It is called with v.run.mu held.
func (v *vm) runHotplug(cmd string, raw json.RawMessage) (ret any, qerr *qmpError, ok bool) {
	var a hotplugArgs
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, &qmpError{"GenericError", err.Error()}, true
		}
	}
	h := &v.run.hot
	if h.cpus == nil {
		h.cpus, h.backends = map[int]string{}, map[string]int64{}
	}
	fail := func(format string, args ...any) (any, *qmpError, bool) {
		return nil, &qmpError{"GenericError", fmt.Sprintf(format, args...)}, true
	}
	switch cmd {
	case "query-hotpluggable-cpus":
		out := []map[string]any{}
		for s := v.cfg.maxCPUs - 1; s >= 0; s-- { // QEMU lists the highest first
			c := map[string]any{"type": fakeCPUType, "vcpus-count": 1, "props": map[string]int{"socket-id": s, "core-id": 0, "thread-id": 0}}
			if id, plugged := h.cpus[s]; plugged { // as QEMU names a device_add'ed vCPU
				c["qom-path"] = "/machine/peripheral/" + id
			} else if s < v.cfg.cpus {
				c["qom-path"] = fmt.Sprintf("/machine/unattached/device[%d]", s)
			}
			out = append(out, c)
		}
		return out, nil, true
	case "query-memory-size-summary":
		var plugged int64
		for _, d := range h.dimms {
			plugged += d.size
		}
		return map[string]int64{"base-memory": int64(v.cfg.memMiB) << 20, "plugged-memory": plugged}, nil, true
	case "query-memory-devices":
		out := []map[string]any{}
		for i, d := range h.dimms {
			out = append(out, map[string]any{"type": "dimm", "data": map[string]any{"id": d.id, "size": d.size, "memdev": "/objects/" + d.memdev, "slot": i, "hotplugged": true, "hotpluggable": true}})
		}
		return out, nil, true
	case "qom-list":
		out := []map[string]string{}
		for id := range h.backends {
			out = append(out, map[string]string{"name": id, "type": "child<memory-backend-ram>"})
		}
		return out, nil, true
	case "object-add":
		if _, dup := h.backends[a.ID]; dup {
			return fail("attempt to add duplicate property '%s' to object (type 'container')", a.ID)
		}
		if a.QOMType != "memory-backend-ram" || a.Size <= 0 {
			return fail("the fake adds memory-backend-ram objects with a size only")
		}
		h.backends[a.ID] = a.Size
	case "object-del":
		if _, ok := h.backends[a.ID]; !ok {
			return fail("object '%s' not found", a.ID)
		}
		for _, d := range h.dimms {
			if d.memdev == a.ID {
				return fail("object '%s' is in use, can not be deleted", a.ID)
			}
		}
		delete(h.backends, a.ID)
	case "device_add":
		return v.deviceAdd(a)
	default:
		return nil, nil, false
	}
	return map[string]any{}, nil, true
}

func (v *vm) deviceAdd(a hotplugArgs) (any, *qmpError, bool) {
	h := &v.run.hot
	fail := func(format string, args ...any) (any, *qmpError, bool) {
		return nil, &qmpError{"GenericError", fmt.Sprintf(format, args...)}, true
	}
	for _, id := range h.ids() {
		if id == a.ID {
			return fail("Duplicate device ID '%s'", a.ID)
		}
	}
	switch {
	case a.Driver == fakeCPUType && v.cfg.modes[CrashAtCPUPlug]:
		// a crash: its last words on stderr (the -D file), no reply, no cleanup
		fmt.Fprintf(os.Stderr, "qemu-system-x86_64: fake: aborting at device_add %s (FAKEQEMU_MODE=crash-at-cpu-plug)\n", a.ID)
		v.exiting <- 9
		select {}
	case a.Driver == fakeCPUType:
		if a.SocketID == nil || a.CoreID == nil || a.ThreadID == nil || *a.SocketID >= v.cfg.maxCPUs || *a.CoreID != 0 || *a.ThreadID != 0 {
			return fail("Invalid CPU [socket: %v, core: %v, thread: %v]; the fake has maxcpus=%d", a.SocketID, a.CoreID, a.ThreadID, v.cfg.maxCPUs)
		}
		if _, plugged := h.cpus[*a.SocketID]; plugged || *a.SocketID < v.cfg.cpus {
			return fail("CPU[%d] with APIC ID %d exists", *a.SocketID, *a.SocketID)
		}
		h.cpus[*a.SocketID] = a.ID
	case a.Driver == "pc-dimm":
		size, ok := h.backends[a.Memdev]
		if !ok {
			return fail("Property 'pc-dimm.memdev' can't find value '%s'", a.Memdev)
		}
		var plugged int64
		for _, d := range h.dimms {
			if d.memdev == a.Memdev {
				return fail("can't use already busy memdev: %s", a.Memdev)
			}
			plugged += d.size
		}
		if len(h.dimms) >= v.cfg.memSlots {
			return fail("no free slots")
		}
		if int64(v.cfg.memMiB)<<20+plugged+size > v.cfg.maxMemMiB<<20 {
			return fail("not enough space, currently 0x%x in use of total space for memory devices 0x%x", plugged, v.cfg.maxMemMiB<<20-int64(v.cfg.memMiB)<<20)
		}
		h.dimms = append(h.dimms, dimm{id: a.ID, memdev: a.Memdev, size: size})
	case strings.HasSuffix(a.Driver, "-x86_64-cpu"):
		return fail("Invalid CPU type, expected cpu type: '%s'", fakeCPUType)
	default:
		return fail("the fake hot-plugs vCPUs and pc-dimms only, not %q", a.Driver)
	}
	return map[string]any{}, nil, true
}

// ids are the ids of the devices hot-plugged so far, sorted.
func (h *hotplug) ids() []string {
	var out []string
	for _, id := range h.cpus {
		out = append(out, id)
	}
	for _, d := range h.dimms {
		out = append(out, d.id)
	}
	sort.Strings(out)
	return out
}
