package qemu

import (
	"os"
	"runtime"
	"strconv"
	"strings"

	"barn.dev/lib/spec"
	"barn.dev/lib/vmrecord"
)

// The hot-plug headroom policy. Every q35 node is started with room to
// grow in place:
//
//   - vCPUs: maxcpus = max(N, min(host logical CPUs, MaxHotplugCPUs)). A
//     possible but absent vCPU costs nothing until it is plugged (no
//     thread under TCG or KVM); a guest never gets more vCPUs than the
//     host has threads unless its definition asks for them.
//   - memory: MemorySlots pc-dimm slots and maxmem = max(M,
//     min(MemoryHeadroomFactor×M, half the host's RAM)), rounded down to
//     MemoryBlock. maxmem reserves guest-physical address space only: no
//     host memory is allocated until a DIMM is plugged. q35 (and pc)
//     have ACPI memory hot-plug; QEMU then adds a NUMA node by itself.
//
// arm64 guests (virt) get none: QEMU 7.2 cannot hot-plug vCPUs on virt,
// and their vCPU and memory changes go through a stop and start.
const (
	MaxHotplugCPUs       = 32
	MemorySlots          = 8
	MemoryHeadroomFactor = 4
	// MemoryBlock is the granularity of memory hot-plug: the x86-64
	// Linux memory block (section) size. A memory increase that is not a
	// multiple of it is applied by a stop and start.
	MemoryBlock = 128 << 20
)

// HostSize is the host capacity the headroom is sized against.
type HostSize struct {
	CPUs        int   // logical CPUs
	MemoryBytes int64 // MemTotal
}

// DetectHostSize reads this host's logical CPUs (runtime.NumCPU) and
// MemTotal (/proc/meminfo; 0 when unreadable, which leaves memory
// without headroom).
func DetectHostSize() HostSize {
	h := HostSize{CPUs: runtime.NumCPU()}
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return h
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "MemTotal:" && f[2] == "kB" {
			if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				h.MemoryBytes = kb << 10
			}
		}
	}
	return h
}

// HeadroomFor is the hot-plug headroom of node n under p (the policy
// above), or nil when p's machine has none (not q35) or p.Host is
// unknown.
func HeadroomFor(n spec.Node, p Profile) *vmrecord.Headroom {
	if p.Machine != "q35" || p.Host.CPUs <= 0 {
		return nil
	}
	h := &vmrecord.Headroom{MaxCPUs: max(n.CPUs, min(p.Host.CPUs, MaxHotplugCPUs)), MaxMemoryBytes: n.MemoryBytes}
	maxMem := min(MemoryHeadroomFactor*n.MemoryBytes, p.Host.MemoryBytes/2) / MemoryBlock * MemoryBlock
	if maxMem > n.MemoryBytes {
		h.MemorySlots, h.MaxMemoryBytes = MemorySlots, maxMem
	}
	return h
}

// smpArg and memArg are -smp's and -m's values for n with headroom h.
func smpArg(n spec.Node, h *vmrecord.Headroom) string {
	s := strconv.Itoa(n.CPUs)
	if h != nil && h.MaxCPUs > n.CPUs {
		s += ",maxcpus=" + strconv.Itoa(h.MaxCPUs)
	}
	return s
}

func memArg(n spec.Node, h *vmrecord.Headroom) string {
	s := strconv.FormatInt(n.MemoryBytes/mib, 10)
	if h != nil && h.MemorySlots > 0 {
		s += ",slots=" + strconv.Itoa(h.MemorySlots) + ",maxmem=" + strconv.FormatInt(h.MaxMemoryBytes/mib, 10) + "M"
	}
	return s
}
