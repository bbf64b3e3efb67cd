// Package vmrecord holds the records of one node's QEMU that Barn
// persists in nodes/<node>/state.json (lib/state) and that the packages
// which launch, identify and signal QEMU (lib/qemu, lib/procid, lib/vm)
// read: its runtime paths, its typed command line, its data disks and the
// identity tuple of its process. It is plain data with no I/O, so those
// packages depend on neither the state root's locks nor its event log.
package vmrecord

// DataDisk is one attached data disk.
type DataDisk struct {
	Name                string `json:"name"`
	Path                string `json:"path"` // absolute qcow2 path
	Serial              string `json:"serial"`
	SizeBytes           int64  `json:"size_bytes"`
	Mount               string `json:"mount"`
	Persistent          bool   `json:"persistent"`
	RequestedFilesystem string `json:"requested_filesystem"`        // auto, xfs or ext4
	ActualFilesystem    string `json:"actual_filesystem,omitempty"` // as reported by the guest
}

// Runtime holds the per-node runtime paths.
type Runtime struct {
	Directory string `json:"directory"`
	QMP       string `json:"qmp"` // the operators' QMP monitor (unix socket, ≤107 bytes)
	// BarnQMP is Barn's own QMP monitor (unix socket, ≤107 bytes): QEMU
	// serves each monitor to one client at a time, so an operator's
	// session on QMP cannot take it. Set whenever QMP is.
	BarnQMP string `json:"barn_qmp,omitempty"`
	Pidfile string `json:"pidfile"` // written by QEMU -pidfile
}

// Sockets are the monitor sockets of rt that are set (QMP, then BarnQMP).
func (rt Runtime) Sockets() []string {
	var out []string
	for _, s := range []string{rt.QMP, rt.BarnQMP} {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Invocation is the typed QEMU command line: Binary plus Args exactly as
// executed, and descriptors passed by inheritance.
type Invocation struct {
	Binary         string          `json:"binary"`
	Args           []string        `json:"args"`
	InheritedFiles []InheritedFile `json:"inherited_files"`
	// Headroom is what the command line lets the running QEMU hot-plug;
	// nil for none.
	Headroom *Headroom `json:"headroom,omitempty"`
}

// InheritedFile is a descriptor passed to QEMU (a share directory).
type InheritedFile struct {
	FD   int    `json:"fd"`
	Kind string `json:"kind"` // "share"
	ID   string `json:"id"`   // the share's mount tag
}

// Process is the identity tuple of a running QEMU: all of it must match
// before a signal is ever sent.
type Process struct {
	PID        int    `json:"pid"`
	Executable string `json:"executable"` // /proc/<pid>/exe target
	// ExecutableFile is "<st_dev>:<st_ino>" of the file /proc/<pid>/exe
	// opens (stat(2) through the link): the file the process runs, which a
	// path alone does not prove.
	ExecutableFile string `json:"executable_file"`
	Started        string `json:"started"`   // "procstat:<starttime ticks>"
	ArgvHash       string `json:"argv_hash"` // hex SHA-256 of the NUL-terminated argv
	Boot           string `json:"boot"`      // host boot id (/proc/sys/kernel/random/boot_id)
}

// Headroom is the hot-plug capacity a QEMU command line provides beyond
// the node's vCPUs and memory (lib/qemu's headroom policy): QEMU is
// started with "-smp N,maxcpus=MaxCPUs" and "-m M,slots=MemorySlots,
// maxmem=MaxMemoryBytes". An invocation without one (nil) is for a
// machine without hot-plug (arm64 virt) or a host whose size is unknown
// (qemu.HeadroomFor): vCPUs and memory then change only by a stop and
// start.
type Headroom struct {
	MaxCPUs        int   `json:"max_cpus"`         // ≥ the node's vCPUs
	MemorySlots    int   `json:"memory_slots"`     // pc-dimm slots; 0: no memory hot-plug
	MaxMemoryBytes int64 `json:"max_memory_bytes"` // ≥ the node's memory
}
