package state

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/spec"
	"barn.dev/lib/vmrecord"
)

// The state root layout: every file name Barn uses under BARN_HOME and the
// runtime directory, in one table. Nothing else in Barn spells these names.
//
//	<BARN_HOME>/                      0700, owned by the user, not a symlink
//	  state.json                      deployment state (barn.state.deployment/v1)
//	  events.jsonl                    bounded event log (barn.event/v1 lines)
//	  locks/deployment.lock           deployment lock + holder record
//	  locks/images.lock               image cache lock + holder record
//	  locks/events.lock               serialises event appends and trims
//	  locks/node-<node>.lock          per-node lock + holder record
//	  keys/{id_ed25519,id_ed25519.pub,known_hosts,keys.json}  (lib/sshkeys; keys.json records what Barn created)
//	  nodes/<node>/                   0700
//	    state.json transaction.json prepare.json
//	    root.qcow2 <disk>.qcow2 seed.iso nvram.fd serial.log (QEMU's, once recorded)
//	    qemu.log (QEMU's -D log and, once daemonized, its stderr; created and
//	      recorded by Barn at each start before QEMU opens it; barn-node logs --source qemu)
//	  disks/<node>/<disk>/            retained persistent disks
//	  images/                         image cache (owned by the repo code)
//	  run/                            default runtime directory (below)
//	<runtime>/<node>/{qmp.sock,barn-qmp.sock,qemu.pid}
//	  runtime = BARN_RUNTIME_DIR, else <BARN_HOME>/run (never under
//	  $XDG_RUNTIME_DIR, which vanishes at logout while QEMU runs); the
//	  node directory is <runtime>/@<16 hex of SHA-256(node)> instead when
//	  <runtime>/<node>/barn-qmp.sock would exceed 107 bytes
const (
	// Directly under BARN_HOME.
	DeploymentFileName = "state.json"
	EventsFileName     = "events.jsonl"
	NodesDirName       = "nodes"
	LocksDirName       = "locks"
	KeysDirName        = "keys"
	DisksDirName       = "disks"
	ImagesDirName      = "images"
	RunDirName         = "run" // the default runtime directory

	// Under locks/.
	DeploymentLockName = "deployment.lock"
	ImagesLockName     = "images.lock"
	EventsLockName     = "events.lock"
	nodeLockPrefix     = "node-"
	lockSuffix         = ".lock"

	// Under keys/.
	PrivateKeyName = "id_ed25519"
	PublicKeyName  = "id_ed25519.pub"
	KnownHostsName = "known_hosts"

	// Directly inside nodes/<node>/.
	NodeStateName   = "state.json"
	JournalName     = "prepare.json"
	TransactionName = "transaction.json"
	RootDiskName    = "root.qcow2"
	SeedName        = "seed.iso"
	NVRAMName       = "nvram.fd"
	SerialLogName   = "serial.log"
	QEMULogName     = "qemu.log"
	DataDiskSuffix  = ".qcow2" // <disk>.qcow2

	// Inside <runtime>/<node>/.
	QMPSocketName     = "qmp.sock"      // the operators' QMP monitor
	BarnQMPSocketName = "barn-qmp.sock" // Barn's own QMP monitor
	PidfileName       = "qemu.pid"

	// MaxSocketPath is the longest unix socket path Linux accepts (bytes;
	// sun_path is 108 bytes including the terminating NUL).
	MaxSocketPath = 107
)

// nodeFileNames is the fixed set of node-directory file names (data disks,
// <disk>.qcow2, are checked separately).
var nodeFileNames = map[string]bool{
	NodeStateName: true, JournalName: true, TransactionName: true,
	RootDiskName: true, SeedName: true, NVRAMName: true,
	SerialLogName: true, QEMULogName: true,
}

// ValidNodeName reports whether name can be a node directory name: the
// spec's node name rule (spec.ValidNodeName: one DNS label, which is also
// a single safe path component).
func ValidNodeName(name string) bool { return spec.ValidNodeName(name) }

// ValidDiskName reports whether name can be a data disk name: the spec's
// disk name rule (spec.CheckDiskName).
func ValidDiskName(name string) bool { return spec.CheckDiskName(name) == nil }

// IsNodeFileName reports whether name is one of the node-directory file
// names of the layout table, including <disk>.qcow2 for a valid disk name.
func IsNodeFileName(name string) bool {
	if nodeFileNames[name] {
		return true
	}
	if d, ok := strings.CutSuffix(name, DataDiskSuffix); ok {
		return ValidDiskName(d)
	}
	return false
}

// StagingName is where a create writes the artifact at path before
// publishing it there: "<dir>/.<name>.barn-<operation id>". The operation
// id is a fresh UUID recorded in the journal before anything is written,
// so a file carrying it in its name was created by that operation.
func StagingName(path, operationID string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+stagingInfix+operationID)
}

const stagingInfix = ".barn-"

// IsOperationFile reports whether name (a file name in a node directory)
// carries operationID the way StagingName and the temporary files written
// beside a staging file do: ".<name>.barn-<operation id>[…]".
func IsOperationFile(name, operationID string) bool {
	if !strings.HasPrefix(name, ".") || operationID == "" {
		return false
	}
	_, after, ok := strings.Cut(name, stagingInfix+operationID)
	return ok && (after == "" || strings.HasPrefix(after, ".") || strings.Trim(after, "0123456789") == "")
}

// DataDiskFileName is the node-directory file name of data disk disk.
func DataDiskFileName(disk string) string { return disk + DataDiskSuffix }

func checkNodeName(node string) error {
	if !ValidNodeName(node) {
		return exitcode.New(exitcode.Usage, "invalid node name %q: want ^[a-z0-9][a-z0-9_.-]{0,63}$", node).
			WithReason("invalid_node_name")
	}
	return nil
}

// DeploymentFile is <Dir>/state.json.
func (r *Root) DeploymentFile() string { return filepath.Join(r.Dir, DeploymentFileName) }

// NodesDir is <Dir>/nodes.
func (r *Root) NodesDir() string { return filepath.Join(r.Dir, NodesDirName) }

// NodeDir is <Dir>/nodes/<node>. It does not validate node; the methods that
// touch the file system do.
func (r *Root) NodeDir(node string) string { return filepath.Join(r.Dir, NodesDirName, node) }

// NodeFile is <Dir>/nodes/<node>/<name>, name being one of the layout
// table's node file names (NodeStateName, RootDiskName, …, or
// DataDiskFileName(disk)).
func (r *Root) NodeFile(node, name string) string { return filepath.Join(r.NodeDir(node), name) }

// KeysDir is <Dir>/keys (id_ed25519, id_ed25519.pub, known_hosts).
func (r *Root) KeysDir() string { return filepath.Join(r.Dir, KeysDirName) }

// LocksDir is <Dir>/locks.
func (r *Root) LocksDir() string { return filepath.Join(r.Dir, LocksDirName) }

// RetainedDiskDir is <Dir>/disks/<node>/<disk>, where a persistent data disk
// is kept (as disk.qcow2) after its node is destroyed.
func (r *Root) RetainedDiskDir(node, disk string) string {
	return filepath.Join(r.Dir, DisksDirName, node, disk)
}

// ImagesDir is <Dir>/images, owned by barn-repo's image cache code.
func (r *Root) ImagesDir() string { return filepath.Join(r.Dir, ImagesDirName) }

// EventsFile is <Dir>/events.jsonl.
func (r *Root) EventsFile() string { return filepath.Join(r.Dir, EventsFileName) }

// lockFile returns the path of a lock by its name: "deployment", "images",
// "events" or "node/<node>".
func (r *Root) lockFile(lockName string) (string, error) {
	switch lockName {
	case LockDeploymentName:
		return filepath.Join(r.LocksDir(), DeploymentLockName), nil
	case LockImagesName:
		return filepath.Join(r.LocksDir(), ImagesLockName), nil
	case lockEventsName:
		return filepath.Join(r.LocksDir(), EventsLockName), nil
	}
	if node, ok := strings.CutPrefix(lockName, lockNodePrefix); ok {
		if err := checkNodeName(node); err != nil {
			return "", err
		}
		return filepath.Join(r.LocksDir(), nodeLockPrefix+node+lockSuffix), nil
	}
	return "", exitcode.New(exitcode.Usage, "unknown lock %q: want deployment, images or node/<node>", lockName)
}

// Runtime paths of node: <RuntimeDir>/<node>/{qmp.sock,barn-qmp.sock,qemu.pid},
// or, when a socket path there would be longer than MaxSocketPath bytes
// (a long node name), the same names in <RuntimeDir>/@<16 hex of
// SHA-256(node)> ('@' is never in a node name). When even that is too
// long it returns a usage error (reason "socket_path_too_long") naming the
// path and its length; a path is never truncated.
func (r *Root) NodeRuntime(node string) (vmrecord.Runtime, error) {
	if err := checkNodeName(node); err != nil {
		return vmrecord.Runtime{}, err
	}
	rt := runtimeIn(filepath.Join(r.RuntimeDir, node))
	if len(rt.BarnQMP) > MaxSocketPath {
		sum := sha256.Sum256([]byte(node))
		rt = runtimeIn(filepath.Join(r.RuntimeDir, "@"+hex.EncodeToString(sum[:8])))
	}
	for _, s := range rt.Sockets() {
		if err := CheckSocketPath(s); err != nil {
			return vmrecord.Runtime{}, err
		}
	}
	return rt, nil
}

func runtimeIn(dir string) vmrecord.Runtime {
	return vmrecord.Runtime{Directory: dir, QMP: filepath.Join(dir, QMPSocketName),
		BarnQMP: filepath.Join(dir, BarnQMPSocketName), Pidfile: filepath.Join(dir, PidfileName)}
}

// CheckSocketPath returns a usage error naming path and its length in
// bytes when path is longer than MaxSocketPath.
func CheckSocketPath(path string) error {
	if len(path) > MaxSocketPath {
		return exitcode.New(exitcode.Usage, "socket path %s is %d bytes; unix sockets allow at most %d (BARN_HOME or BARN_RUNTIME_DIR is too deep)", path, len(path), MaxSocketPath).
			WithReason("socket_path_too_long").
			WithNext("export BARN_RUNTIME_DIR=/var/tmp/barn-$(id -u)   # any short directory that survives logout (not under $XDG_RUNTIME_DIR)")
	}
	return nil
}
