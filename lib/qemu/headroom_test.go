package qemu

import (
	"testing"

	"barn.dev/lib/spec"
	"barn.dev/lib/vmrecord"
)

// The headroom policy: vCPUs up to the host's threads (capped), memory up
// to four times the node's or half the host's RAM, whichever is smaller,
// in whole memory blocks; never below the definition; none on virt or on
// an unknown host.
func TestHeadroomPolicy(t *testing.T) {
	const gib = 1 << 30
	q35 := func(cpus int, mem int64) Profile {
		return Profile{Machine: "q35", Host: HostSize{CPUs: cpus, MemoryBytes: mem}}
	}
	cases := []struct {
		name string
		cpus int
		mem  int64
		p    Profile
		want *vmrecord.Headroom
	}{
		{"small node on a big host", 1, 1 * gib, q35(64, 256*gib), &vmrecord.Headroom{MaxCPUs: MaxHotplugCPUs, MemorySlots: MemorySlots, MaxMemoryBytes: 4 * gib}},
		{"half the host's RAM caps memory", 2, 4 * gib, q35(2, 12*gib), &vmrecord.Headroom{MaxCPUs: 2, MemorySlots: MemorySlots, MaxMemoryBytes: 6 * gib}},
		{"rounded down to a memory block", 1, 1 * gib, q35(2, 3*gib+100<<20), &vmrecord.Headroom{MaxCPUs: 2, MemorySlots: MemorySlots, MaxMemoryBytes: 1536 << 20}},
		{"a node bigger than the host has no room", 4, 8 * gib, q35(2, 8*gib), &vmrecord.Headroom{MaxCPUs: 4, MaxMemoryBytes: 8 * gib}},
		{"virt has none", 1, 1 * gib, Profile{Machine: "virt", Host: HostSize{CPUs: 8, MemoryBytes: 16 * gib}}, nil},
		{"unknown host has none", 1, 1 * gib, Profile{Machine: "q35"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := HeadroomFor(spec.Node{CPUs: c.cpus, MemoryBytes: c.mem}, c.p)
			if (got == nil) != (c.want == nil) || got != nil && *got != *c.want {
				t.Fatalf("HeadroomFor = %+v, want %+v", got, c.want)
			}
		})
	}
}
