package plan

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"barn.dev/lib/spec"
	"barn.dev/lib/wire"
)

// envelopeChanges lists the deployment-envelope fields that differ between
// the applied envelope from and the desired envelope to. Every one of them
// requires whole-deployment recreation.
func envelopeChanges(from, to spec.Deployment) ([]Change, []string) {
	var ch []Change
	var lines []string
	add := func(field string, f, t any, line string) {
		ch = append(ch, Change{Field: field, From: f, To: t})
		lines = append(lines, line)
	}
	if from.Name != to.Name {
		add("deployment.name", from.Name, to.Name, fmt.Sprintf("deployment name: %s -> %s", from.Name, to.Name))
	}
	if from.Arch != to.Arch {
		add("deployment.arch", from.Arch, to.Arch, fmt.Sprintf("guest architecture: %s -> %s", from.Arch, to.Arch))
	}
	if from.Image != to.Image {
		add("deployment.image", from.Image, to.Image, fmt.Sprintf("default image: %s -> %s", from.Image, to.Image))
	}
	if from.Subnet != to.Subnet {
		add("deployment.subnet", from.Subnet, to.Subnet, fmt.Sprintf("private network: %s -> %s", from.Subnet.CIDR, to.Subnet.CIDR))
	}
	if from.User != to.User {
		add("deployment.user", from.User, to.User, fmt.Sprintf("login user: %s (uid %d) -> %s (uid %d)", from.User.Name, from.User.UID, to.User.Name, to.User.UID))
	}
	if len(ch) == 0 && !sameJSON(from, to) {
		// A field added to spec.Deployment after this code was written.
		add("deployment", from, to, "deployment settings changed")
	}
	return ch, lines
}

// nodeChanges lists the fields of node definition to that differ from the
// committed definition from, with one human line per change prefixed by the
// node name ("meta memory: 4 GiB -> 8 GiB"). A data disk whose fs is auto
// (or empty) on either side matches any filesystem on the other: a
// committed concrete fs is not drift against `fs: auto`.
func nodeChanges(from, to spec.Node) ([]Change, []string) {
	var ch []Change
	var lines []string
	name := to.Name
	add := func(field string, f, t any, format string, args ...any) {
		ch = append(ch, Change{Field: field, From: f, To: t})
		lines = append(lines, name+" "+fmt.Sprintf(format, args...))
	}
	if from.Address != to.Address {
		add("address", from.Address, to.Address, "address: %s -> %s", from.Address, to.Address)
	}
	if from.MAC != to.MAC {
		add("mac", from.MAC, to.MAC, "MAC addresses: %s/%s -> %s/%s", from.MAC.Management, from.MAC.Private, to.MAC.Management, to.MAC.Private)
	}
	if from.Control != to.Control {
		add("control", from.Control, to.Control, "control node: %t -> %t", from.Control, to.Control)
	}
	if from.Image != to.Image {
		add("image", from.Image, to.Image, "image: %s -> %s", from.Image, to.Image)
	}
	if from.CPUs != to.CPUs {
		add("cpus", from.CPUs, to.CPUs, "CPUs: %d -> %d", from.CPUs, to.CPUs)
	}
	if from.MemoryBytes != to.MemoryBytes {
		add("memory_bytes", from.MemoryBytes, to.MemoryBytes, "memory: %s -> %s", FormatSize(from.MemoryBytes), FormatSize(to.MemoryBytes))
	}
	if from.RootDiskBytes != to.RootDiskBytes {
		add("root_disk_bytes", from.RootDiskBytes, to.RootDiskBytes, "root disk: %s -> %s", FormatSize(from.RootDiskBytes), FormatSize(to.RootDiskBytes))
	}
	if dl := diskLines(from.Disks, to.Disks); len(dl) > 0 {
		ch = append(ch, Change{Field: "disks", From: nonNil(from.Disks), To: nonNil(to.Disks)})
		for _, l := range dl {
			lines = append(lines, name+" "+l)
		}
	}
	if !sameSet(from.Aliases, to.Aliases) {
		add("aliases", nonNil(from.Aliases), nonNil(to.Aliases), "aliases: [%s] -> [%s]", strings.Join(from.Aliases, " "), strings.Join(to.Aliases, " "))
	}
	if sl := shareLines(from.Shares, to.Shares); len(sl) > 0 {
		ch = append(ch, Change{Field: "shares", From: nonNil(from.Shares), To: nonNil(to.Shares)})
		for _, l := range sl {
			lines = append(lines, name+" "+l)
		}
	}
	if len(ch) == 0 {
		// Catch fields added to spec.Node after this code was written:
		// compare everything the explicit checks above did not.
		f, t := from, to
		f.Disks, t.Disks = nil, nil
		f.Aliases, t.Aliases = nil, nil
		f.Shares, t.Shares = nil, nil
		f.SpecHash, t.SpecHash = "", ""
		if !reflect.DeepEqual(f, t) && !sameJSON(f, t) {
			add("node", from, to, "definition changed")
		}
	}
	return ch, lines
}

// diskLines describes data disk differences, matching disks by name.
func diskLines(from, to []spec.Disk) []string {
	old := make(map[string]spec.Disk, len(from))
	for _, d := range from {
		old[d.Name] = d
	}
	var lines []string
	seen := make(map[string]bool, len(to))
	for _, d := range to {
		seen[d.Name] = true
		o, ok := old[d.Name]
		if !ok {
			lines = append(lines, "data disk "+d.Mount+" added: "+DiskLabel(d))
			continue
		}
		if o.SizeBytes != d.SizeBytes {
			lines = append(lines, fmt.Sprintf("data disk %s size: %s -> %s", d.Mount, FormatSize(o.SizeBytes), FormatSize(d.SizeBytes)))
		}
		if o.Mount != d.Mount {
			lines = append(lines, fmt.Sprintf("data disk %s mount: %s -> %s", d.Name, o.Mount, d.Mount))
		}
		if !sameFS(o.FS, d.FS) {
			lines = append(lines, fmt.Sprintf("data disk %s fs: %s -> %s", d.Mount, o.FS, d.FS))
		}
		if o.Persistent != d.Persistent {
			lines = append(lines, fmt.Sprintf("data disk %s persistent: %t -> %t", d.Mount, o.Persistent, d.Persistent))
		}
		if o.Serial != d.Serial {
			lines = append(lines, fmt.Sprintf("data disk %s serial: %s -> %s", d.Mount, o.Serial, d.Serial))
		}
	}
	for _, o := range from {
		if !seen[o.Name] {
			lines = append(lines, "data disk "+o.Mount+" removed: "+DiskLabel(o))
		}
	}
	return lines
}

// sameFS reports whether two requested filesystems are equivalent: auto
// (or empty) matches anything.
func sameFS(a, b string) bool {
	if a == "" || a == "auto" || b == "" || b == "auto" {
		return true
	}
	return a == b
}

// DiskLabel renders a data disk for humans: "/data 128 GiB (auto fs)",
// with ", persistent" when it survives recreate and destroy.
func DiskLabel(d spec.Disk) string {
	fs := d.FS
	if fs == "" {
		fs = "auto"
	}
	s := fmt.Sprintf("%s %s (%s fs", d.Mount, FormatSize(d.SizeBytes), fs)
	if d.Persistent {
		s += ", persistent"
	}
	return s + ")"
}

// shareLines describes shared-directory differences, matching by guest path.
func shareLines(from, to []spec.Share) []string {
	key := func(s spec.Share) string { return s.Guest }
	old := make(map[string]spec.Share, len(from))
	for _, s := range from {
		old[key(s)] = s
	}
	var lines []string
	seen := make(map[string]bool, len(to))
	for _, s := range to {
		seen[key(s)] = true
		o, ok := old[key(s)]
		switch {
		case !ok:
			lines = append(lines, "share "+shareLabel(s)+" added")
		case o != s:
			lines = append(lines, "share "+shareLabel(o)+" -> "+shareLabel(s))
		}
	}
	for _, o := range from {
		if !seen[key(o)] {
			lines = append(lines, "share "+shareLabel(o)+" removed")
		}
	}
	return lines
}

func shareLabel(s spec.Share) string {
	mode := "rw"
	if s.Readonly {
		mode = "ro"
	}
	return fmt.Sprintf("%s:%s (%s)", s.Host, s.Guest, mode)
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

func sameJSON(a, b any) bool {
	x, errA := wire.Marshal(a)
	y, errB := wire.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(x, y)
}

// nonNil returns s, or an empty slice for nil, so that changes render as
// [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
