package vm

import (
	"fmt"
	"sort"
	"strings"

	"barn.dev/lib/qmp"
)

// Layout is what a running QEMU reports of its vCPUs and memory over QMP
// (a vCPU from the command line lives under /machine/unattached, one
// plugged by device_add under /machine/peripheral; checked on QEMU 7.2):
// the part of its device layout a vmstate (QEMU's snapshot-save) depends
// on that hot-plug changes after launch, so that only QEMU itself knows
// (a hot-plug interrupted before Barn recorded it included).
type Layout struct {
	CPUs       []string `json:"cpus"`        // present vCPU slots, by device id (cpuID), sorted
	HotCPUs    []string `json:"hot_cpus"`    // those of CPUs plugged by device_add, not the command line's
	Slots      int      `json:"cpu_slots"`   // every vCPU slot (maxcpus)
	BaseMemory int64    `json:"base_memory"` // bytes, from the command line
	DIMMs      []string `json:"dimms"`       // hot-plugged memory devices, "<id>:<bytes>", sorted
}

// ReadLayout reads the layout of the QEMU behind s (query-hotpluggable-cpus,
// query-memory-size-summary, query-memory-devices). The caller has proven
// the session's identity.
func ReadLayout(s *qmp.Session) (Layout, error) {
	var slots []HotplugCPU
	if err := s.Execute("query-hotpluggable-cpus", nil, &slots); err != nil {
		return Layout{}, err
	}
	var sum memorySummary
	if err := s.Execute("query-memory-size-summary", nil, &sum); err != nil {
		return Layout{}, err
	}
	var devs []memoryDevice
	if err := s.Execute("query-memory-devices", nil, &devs); err != nil {
		return Layout{}, err
	}
	l := Layout{CPUs: []string{}, HotCPUs: []string{}, Slots: len(slots), BaseMemory: sum.Base, DIMMs: []string{}}
	for _, c := range slots {
		if c.QOMPath != "" {
			l.CPUs = append(l.CPUs, cpuID(c))
		}
		if strings.HasPrefix(c.QOMPath, "/machine/peripheral/") { // QEMU's home of device_add'ed devices
			l.HotCPUs = append(l.HotCPUs, cpuID(c))
		}
	}
	for _, d := range devs {
		l.DIMMs = append(l.DIMMs, fmt.Sprintf("%s:%d", d.Data.ID, d.Data.Size))
	}
	sort.Strings(l.CPUs)
	sort.Strings(l.HotCPUs)
	sort.Strings(l.DIMMs)
	return l, nil
}

// Equal reports whether l and o are the same layout (printed alike: a
// missing list in a record reads as an empty one).
func (l Layout) Equal(o Layout) bool {
	return fmt.Sprint(l) == fmt.Sprint(o)
}

// Launched reports whether l is what a launch with cpus vCPUs and
// memBytes of memory gives, before any hot-plug: a restart from that
// definition brings it back.
func (l Layout) Launched(cpus int, memBytes int64) bool {
	return len(l.CPUs) == cpus && len(l.HotCPUs) == 0 && l.BaseMemory == memBytes && len(l.DIMMs) == 0
}
