package hostnet

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/safefile"
	"barn.dev/lib/wire"
)

// ManifestSchema is the schema of the root-owned manifest.
const ManifestSchema = "barn.net.manifest/v1"

// maxManifestBytes bounds the manifest a reader accepts (1 MiB).
const maxManifestBytes = 1 << 20

// Manifest status values.
const (
	StatusInstalling = "installing" // written before the first change; applied counts progress
	StatusInstalled  = "installed"  // readiness proof passed
)

// Manifest records what Barn created and what existed before (the
// prestate), at <StateDir>/network.json, mode 0600, root-owned.
type Manifest struct {
	Schema string `json:"schema"`
	Status string `json:"status"`
	// InstallID is random per install (16 hex digits); the netlink bridge
	// carries it in its alias and MAC.
	InstallID   string `json:"install_id,omitempty"`
	Backend     string `json:"backend"`
	Bridge      string `json:"bridge"`
	CIDR        string `json:"cidr"`
	HostAddress string `json:"host_address"`
	DHCPEnd     string `json:"dhcp_end"`
	Helper      string `json:"helper"`
	// Prestate: files and units as they were before the first change.
	Prestate Prestate `json:"prestate"`
	// Steps is the applied plan; Applied is how many of them took effect.
	Steps   []Step `json:"steps"`
	Applied int    `json:"applied"`
	// Files maps every file Barn wrote to its sha256 after install.
	Files map[string]string `json:"files"`
	// Created is the identity of the bridge and connection Barn created
	// (identity.go): written before they exist, completed after.
	Created Created `json:"created"`
}

// Prestate is the host state Barn restores on uninstall.
type Prestate struct {
	BridgeConf FileState            `json:"bridge_conf"`
	QemuDir    FileState            `json:"qemu_dir"`
	Helper     FileState            `json:"helper"`
	Units      map[string]UnitState `json:"units"`
	// FirewalldZone is the zone firewalld's runtime bound the bridge's
	// name to ("" none, or firewalld not running).
	FirewalldZone string `json:"firewalld_zone,omitempty"`
}

// UnitState is a systemd unit's recorded state.
type UnitState struct {
	Active  string `json:"active"`  // systemctl is-active
	Enabled string `json:"enabled"` // systemctl is-enabled
}

// ReadManifest returns (nil, nil) when there is none, and an integrity (7)
// error naming the file when it is damaged, a symlink, not 0600, or owned
// by a user other than root and the effective user.
func (h *Host) ReadManifest() (*Manifest, error) {
	path := h.ManifestPath()
	b, err := readOwned(path)
	if b == nil || err != nil {
		return nil, err
	}
	var m Manifest
	if err := wire.DecodeStrict(b, &m); err != nil {
		return nil, exitcode.Wrap(exitcode.Integrity, err, "manifest %s is damaged", path).WithReason("manifest_damaged")
	}
	if m.Schema != ManifestSchema {
		return nil, exitcode.New(exitcode.Integrity, "manifest %s: schema %q, want %q", path, m.Schema, ManifestSchema).WithReason("manifest_damaged")
	}
	if m.Applied < 0 || m.Applied > len(m.Steps) {
		return nil, exitcode.New(exitcode.Integrity, "manifest %s: applied=%d outside 0..%d", path, m.Applied, len(m.Steps)).WithReason("manifest_damaged")
	}
	if err := checkUndoCommands(path, m.Steps); err != nil {
		return nil, err
	}
	return &m, nil
}

// undoCommands are the only steps this barn-net records with an undo
// command (Step.UndoArgv), which uninstall runs as root: the vmnet
// binaries and service (vmnet.go). Every other undo is judged on the host
// first (undoCheck).
var undoCommands = []string{"vmnet-binaries", "vmnet-bootstrap"}

// checkUndoCommands refuses (integrity, reason "dev_build_format") a
// manifest with an undo command on any other step: development builds
// before the first release recorded commands that act by name without
// proof (nmcli connection delete barn0, systemctl stop ...), and Barn runs
// no undo it did not write.
func checkUndoCommands(path string, steps []Step) error {
	for _, s := range steps {
		if len(s.UndoArgv) > 0 && !slices.Contains(undoCommands, s.ID) {
			return exitcode.New(exitcode.Integrity, "manifest %s was written by a development build of barn-net: step %s undoes by running %q, which no release records; Barn does not run it",
				path, s.ID, strings.Join(s.UndoArgv, " ")).WithReason("dev_build_format").
				WithNext("undo the steps " + path + " lists by hand (check each is what that build created), then sudo rm " + path)
		}
	}
	return nil
}

// readOwned reads a root-owned manifest: nil, nil when absent; otherwise a
// regular 0600 file owned by root (or this very user), checked on the
// descriptor it is read from (lib/safefile), so a file swapped in after a
// check, or a symlink planted at the path, is never what gets trusted.
// Uninstall acts as root on the paths and modes a manifest lists. An empty
// or otherwise damaged manifest is integrity (7), never "not installed".
func readOwned(path string) ([]byte, error) { return readOwnedMode(path, 0o600) }

// readOwnedMode is readOwned for a root-owned file of mode perm (the fault
// record is 0644: barn-node status, unprivileged, reads it).
func readOwnedMode(path string, perm fs.FileMode) ([]byte, error) {
	b, _, err := safefile.ReadFile(path, maxManifestBytes, func(fi fs.FileInfo) error {
		if fi.Mode().Perm() != perm {
			return exitcode.New(exitcode.Integrity, "manifest %s has mode %04o, want %04o", path, fi.Mode().Perm(), perm).WithReason("manifest_damaged").
				WithNext(fmt.Sprintf("chmod %04o %s", perm, path))
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Geteuid() {
			return exitcode.New(exitcode.Integrity, "manifest %s is owned by uid %d, not by root; Barn does not trust it", path, st.Uid).WithReason("manifest_damaged")
		}
		return nil
	})
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case errors.Is(err, safefile.ErrNotRegular):
		return nil, exitcode.New(exitcode.Integrity, "manifest %s is not a regular file (a symlink, directory or device)", path).WithReason("manifest_damaged")
	case exitcode.ClassOf(err) == exitcode.Integrity:
		return nil, err
	case err != nil:
		return nil, exitcode.Wrap(exitcode.Integrity, err, "manifest %s is unreadable", path).WithReason("manifest_damaged")
	case len(bytes.TrimSpace(b)) == 0:
		return nil, exitcode.New(exitcode.Integrity, "manifest %s is empty", path).WithReason("manifest_damaged")
	}
	return b, nil
}

// writeManifest writes m atomically (temp file, fsync, rename) with mode 0600.
func (h *Host) writeManifest(m *Manifest) error {
	b, err := wire.MarshalIndent(m)
	if err != nil {
		return err
	}
	if err := h.ensureStateDir(); err != nil {
		return err
	}
	return writeAtomic(h.ManifestPath(), append(b, '\n'), 0o600)
}

// writeAtomic replaces path through safefile.Write (Barn's one atomic
// write); mode may carry setuid, setgid and sticky bits, which are applied
// to the new file before the rename makes it visible.
func writeAtomic(path string, data []byte, mode uint32) error {
	if mode&^0o777 == 0 {
		return safefile.Write(path, data, os.FileMode(mode))
	}
	p, err := safefile.Create(path, os.FileMode(mode&0o777))
	if err != nil {
		return err
	}
	defer p.Cleanup()
	if _, err := p.Write(data); err != nil {
		return err
	}
	if err := chmodRaw(p.Name(), mode); err != nil {
		return err
	}
	return p.Commit()
}
