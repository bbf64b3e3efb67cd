package hostnet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/wire"
)

// ManifestSchema is the schema of the root-owned manifest.
const ManifestSchema = "barn.net.manifest/v1"

// Manifest status values.
const (
	StatusInstalling = "installing" // written before the first change; applied counts progress
	StatusInstalled  = "installed"  // readiness proof passed
)

// Manifest records what Barn created and what existed before (the
// prestate), at <StateDir>/network.json, mode 0600, root-owned.
type Manifest struct {
	Schema      string `json:"schema"`
	Status      string `json:"status"`
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
}

// Prestate is the host state Barn restores on uninstall.
type Prestate struct {
	BridgeConf FileState            `json:"bridge_conf"`
	QemuDir    FileState            `json:"qemu_dir"`
	Helper     FileState            `json:"helper"`
	Units      map[string]UnitState `json:"units"`
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
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "reading manifest")
	}
	if !fi.Mode().IsRegular() {
		return nil, exitcode.New(exitcode.Integrity, "manifest %s is not a regular file", path).WithReason("manifest_damaged")
	}
	if fi.Mode().Perm() != 0o600 {
		return nil, exitcode.New(exitcode.Integrity, "manifest %s has mode %04o, want 0600", path, fi.Mode().Perm()).WithReason("manifest_damaged").
			WithNext("chmod 0600 " + path)
	}
	// Uninstall acts as root on the paths and modes the manifest lists, so
	// only a manifest written by root (or by this very user) is trusted.
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return nil, exitcode.New(exitcode.Integrity, "manifest %s is owned by uid %d, not by root; Barn does not trust it", path, st.Uid).WithReason("manifest_damaged")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "reading manifest")
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
	return &m, nil
}

// writeManifest writes m atomically (temp file, fsync, rename) with mode 0600.
func (h *Host) writeManifest(m *Manifest) error {
	b, err := wire.MarshalIndent(m)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(h.StateDir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", h.StateDir, err)
	}
	return writeAtomic(h.ManifestPath(), append(b, '\n'), 0o600)
}

func writeAtomic(path string, data []byte, mode uint32) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := chmodRaw(tmp, mode); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
