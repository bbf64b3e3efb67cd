package state

import (
	"time"

	"barn.dev/lib/fileid"
	"barn.dev/lib/imageref"
	"barn.dev/lib/spec"
	"barn.dev/lib/vmrecord"
)

// Schema names of the persisted documents. A document whose schema is newer
// than these (a higher /vN) is refused as written by a newer Barn.
const (
	DeploymentSchema  = "barn.state.deployment/v1"
	NodeSchema        = "barn.state.node/v1"
	JournalSchema     = "barn.state.journal/v1"
	TransactionSchema = "barn.state.transaction/v1"
	LockHolderSchema  = "barn.state.lock/v1"
	EventSchema       = "barn.event/v1"
)

// Phase is a node's committed lifecycle phase.
type Phase string

// The node phases.
const (
	Absent     Phase = "absent"
	Preparing  Phase = "preparing"
	Prepared   Phase = "prepared"
	Starting   Phase = "starting"
	Running    Phase = "running"
	Stopping   Phase = "stopping"
	Stopped    Phase = "stopped"
	Destroying Phase = "destroying"
)

// Deployment is <BARN_HOME>/state.json: the applied resolved spec.
// SpecHash must equal spec.DeploymentHash(&Spec) on read.
type Deployment struct {
	Schema     string    `json:"schema"`
	Generation int64     `json:"generation"` // ≥1, incremented on every applied change
	SpecHash   string    `json:"spec_hash"`
	Spec       spec.Spec `json:"spec"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// Node is <BARN_HOME>/nodes/<node>/state.json: one node's committed state.
// Validation (Root.ValidateNode): node equals its directory; vm_uuid is a
// UUID; phase is one of the phases; generation ≥1; spec_hash is 64 hex;
// root_disk, seed, nvram and serial_log (when set) are the layout's paths
// in the node directory; data disk paths are <node dir>/<name>.qcow2;
// runtime.qmp ≤107 bytes; files names an identity for each of those files.
type Node struct {
	Schema     string              `json:"schema"`
	Node       string              `json:"node"`
	VMUUID     string              `json:"vm_uuid"`
	Phase      Phase               `json:"phase"`
	Generation int64               `json:"generation"` // ≥1; the seed's instance-id changes with it
	SpecHash   string              `json:"spec_hash"`  // node hash of the spec it was built from
	Spec       spec.Node           `json:"spec"`       // the node definition it was built from
	Image      imageref.Identity   `json:"image"`      // exact base image
	RootDisk   string              `json:"root_disk"`  // absolute path of root.qcow2
	DataDisks  []vmrecord.DataDisk `json:"data_disks"`
	Seed       string              `json:"seed"`            // absolute path of seed.iso
	NVRAM      string              `json:"nvram,omitempty"` // absolute path of nvram.fd for uefi
	SSHPort    int                 `json:"ssh_port"`        // management SSH forward on 127.0.0.1
	Accel      string              `json:"accel"`           // kvm or tcg
	Runtime    vmrecord.Runtime    `json:"runtime"`
	Invocation vmrecord.Invocation `json:"invocation"`
	Process    *vmrecord.Process   `json:"process,omitempty"` // required when running; allowed only when starting, running or stopping
	// SerialLog is the serial console file QEMU writes (-serial file:,
	// which opens it with O_TRUNC and keeps the inode), created empty by
	// the node's create as a journaled artifact: files records it, and
	// destroy deletes it by that record.
	SerialLog string `json:"serial_log,omitempty"`
	// SeedSpecHash is the node hash its seed was rendered with, and so
	// the one the guest's ready marker carries, when it differs from
	// SpecHash: a resize changes the definition (vCPUs, memory, root disk)
	// without rendering the seed again, which would change the guest's
	// identity. Empty means SpecHash. See ReadyHash.
	SeedSpecHash string `json:"seed_spec_hash,omitempty"`
	// Hotplug, when set, says the running QEMU reached Spec's vCPUs and
	// memory by hot-plug: Invocation is still the one it was launched
	// with, for the vCPUs and memory recorded here. The next launch builds
	// the invocation from Spec and clears it.
	Hotplug *Hotplug `json:"hotplug,omitempty"`
	// Files is the identity (lib/fileid: device, inode, birth time, inode generation; and
	// the SHA-256 of seed.iso) of every file Barn created or moved into
	// the node directory, by its name there: root.qcow2, <disk>.qcow2,
	// seed.iso, nvram.fd, serial.log and qemu.log (which Barn creates
	// before QEMU opens them). Destroy deletes a file only while it is still that file.
	// Every file the state records has one (see "File identities" in the
	// package doc).
	Files     map[string]fileid.ID `json:"files,omitempty"`
	CreatedAt time.Time            `json:"created_at"`
	UpdatedAt time.Time            `json:"updated_at"`
}

// Hotplug is what a hot-plugged node's QEMU was launched with.
type Hotplug struct {
	LaunchCPUs        int   `json:"launch_cpus"`
	LaunchMemoryBytes int64 `json:"launch_memory_bytes"`
}

// ReadyHash is the node hash the guest's ready marker carries: the
// seed's (SeedSpecHash) after a resize, else SpecHash.
func (n *Node) ReadyHash() string {
	if n.SeedSpecHash != "" {
		return n.SeedSpecHash
	}
	return n.SpecHash
}

// Journal is <BARN_HOME>/nodes/<node>/prepare.json, a write-ahead record
// of one create: written before the first artifact, rewritten with Intent
// before each artifact exists and again, the artifact moved to Completed,
// once it does. A crash at any point leaves a bounded list of what to roll
// back, and nothing in the node directory that no journal entry names.
//
// A file a create publishes is first written under its staging name,
// StagingName(path, OperationID) — a name only this operation uses — and
// then given its real name as a second link. The staging file's identity
// is journaled in Intent before the link: while Intent names it, the
// artifact is provably Barn's only while it is that identity.
type Journal struct {
	Schema      string     `json:"schema"`
	OperationID string     `json:"operation_id"` // UUID
	Node        string     `json:"node"`
	VMUUID      string     `json:"vm_uuid"`   // UUID
	SpecHash    string     `json:"spec_hash"` // node hash
	Completed   []Artifact `json:"completed"`
	// Intent is the artifact being created (or reattached) now, recorded
	// before it exists; nil between artifacts and once prepared.
	Intent         *Artifact            `json:"intent,omitempty"`
	Invocation     *vmrecord.Invocation `json:"invocation,omitempty"` // set once prepared
	Prepared       bool                 `json:"prepared"`
	StateCommitted bool                 `json:"state_committed"`
	StatePath      string               `json:"state_path,omitempty"` // <nodeDir>/state.json once committed
	StartedAt      time.Time            `json:"started_at"`
	UpdatedAt      time.Time            `json:"updated_at"`
}

// ArtifactKind is one kind in the journal's fixed allowlist.
type ArtifactKind string

// The allowlisted artifact kinds and the file each must be, directly inside
// the node directory.
const (
	RootOverlay  ArtifactKind = "root-overlay" // root.qcow2
	Seed         ArtifactKind = "seed"         // seed.iso
	NVRAM        ArtifactKind = "nvram"        // nvram.fd
	DataDiskArt  ArtifactKind = "data-disk"    // <name>.qcow2, name a DNS label other than "root"
	SerialLogArt ArtifactKind = "serial-log"   // serial.log, created empty for QEMU's -serial file:
)

// Artifact is one journal entry.
type Artifact struct {
	Kind ArtifactKind `json:"kind"`
	Path string       `json:"path"` // absolute, directly inside the node directory
	// Retained is set for a data disk reattached from the retained store:
	// its directory there (RetainedDiskDir of this node and disk), which
	// keeps the ownership marker until the node's state is committed, so
	// a rollback can move the disk back and nothing is ever unowned.
	Retained string `json:"retained,omitempty"`
	// ID is the identity of the file at Path; rollback removes or returns
	// it only while it is still that file. In an intent it is the staging
	// file's identity, journaled before the file is linked at Path (absent
	// until then: nothing at Path is Barn's); required in completed.
	ID *fileid.ID `json:"id,omitempty"`
}

// Transaction is <BARN_HOME>/nodes/<node>/transaction.json: an in-flight
// phase transition (start, stop, destroy, recreate) and its completed steps.
type Transaction struct {
	Schema      string    `json:"schema"`
	OperationID string    `json:"operation_id"` // UUID
	Node        string    `json:"node"`
	From        Phase     `json:"from"`
	To          Phase     `json:"to"`
	Completed   []TxnStep `json:"completed"`
	StartedAt   time.Time `json:"started_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// TxnStep is one completed step of a transaction.
type TxnStep struct {
	Name     string `json:"name"`
	Resource string `json:"resource"`
}

// LockHolder is what the holder of a lock writes into its lock file.
type LockHolder struct {
	Schema  string    `json:"schema"` // LockHolderSchema
	PID     int       `json:"pid"`
	Command string    `json:"command"` // argv joined, ≤200 chars plus "…"
	Started time.Time `json:"started"`
}

// Event is one line of <BARN_HOME>/events.jsonl.
type Event struct {
	Schema      string    `json:"schema"`
	Time        time.Time `json:"time"`
	Level       string    `json:"level"` // error, warn, info, debug
	Node        string    `json:"node"`  // "deployment" for deployment-wide
	OperationID string    `json:"operation_id"`
	Action      string    `json:"action"`
	Phase       string    `json:"phase"`
	Message     string    `json:"message"`
}
