package cidata

import (
	"encoding/binary"
	"fmt"
	"os"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/safefile"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
)

// VolumeID is the ISO9660 volume identifier cloud-init's NoCloud datasource
// looks for (ds-identify matches the label "cidata").
const VolumeID = "cidata"

// Seed file names inside the ISO.
const (
	MetaDataName      = "meta-data"
	UserDataName      = "user-data"
	NetworkConfigName = "network-config"
)

// WriteISO writes f to path as an ISO9660 image with volume id "cidata",
// Rock Ridge (so Linux sees the exact names meta-data, user-data,
// network-config) and Joliet. The image is built by
// github.com/diskfs/go-diskfs (its iso9660 writer supports both
// extensions; kdomanski/iso9660 has no Joliet). The write is Barn's one
// atomic write (lib/safefile: a same-directory temporary file, fsync,
// rename, directory fsync), mode 0600. An existing file at path is
// replaced. Failures are runtime errors (exitcode) with reason
// "seed_write".
func WriteISO(path string, f Files) error {
	if err := writeISO(path, f); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "writing the NoCloud seed").WithReason("seed_write")
	}
	return nil
}

func writeISO(path string, f Files) error {
	for name, b := range map[string][]byte{MetaDataName: f.MetaData, UserDataName: f.UserData, NetworkConfigName: f.NetworkConfig} {
		if len(b) == 0 {
			return fmt.Errorf("write seed %s: %s is empty", path, name)
		}
	}
	// The image is built in place in the pending file of Barn's one atomic
	// write ("."+base(path)+"<digits>"; a create writes to its staging
	// name, so this temporary carries the operation id too).
	tmp, err := safefile.Create(path, 0o600)
	if err != nil {
		return fmt.Errorf("write seed: %w", err)
	}
	defer tmp.Cleanup()
	work, err := os.MkdirTemp("", "barn-cidata-*")
	if err != nil {
		return fmt.Errorf("write seed %s: %w", path, err)
	}
	defer os.RemoveAll(work)
	fsys, err := iso9660.Create(file.New(tmp.File, false), 0, 0, 2048, work)
	if err != nil {
		return fmt.Errorf("write seed %s: create iso9660: %w", path, err)
	}
	for _, e := range []struct {
		name string
		data []byte
	}{{MetaDataName, f.MetaData}, {NetworkConfigName, f.NetworkConfig}, {UserDataName, f.UserData}} {
		w, err := fsys.OpenFile(e.name, os.O_CREATE|os.O_RDWR)
		if err != nil {
			return fmt.Errorf("write seed %s: %s: %w", path, e.name, err)
		}
		if _, err := w.Write(e.data); err != nil {
			return fmt.Errorf("write seed %s: %s: %w", path, e.name, err)
		}
		if err := w.Close(); err != nil {
			return fmt.Errorf("write seed %s: %s: %w", path, e.name, err)
		}
	}
	if err := fsys.Finalize(iso9660.FinalizeOptions{RockRidge: true, Joliet: true, VolumeIdentifier: VolumeID}); err != nil {
		return fmt.Errorf("write seed %s: finalize iso9660: %w", path, err)
	}
	if err := normalize(tmp.File); err != nil {
		return fmt.Errorf("write seed %s: %w", path, err)
	}
	if err := tmp.Commit(); err != nil {
		return fmt.Errorf("write seed: %w", err)
	}
	return nil
}

// normalize fixes two details of go-diskfs v1.9.4's output that strict
// readers care about: the primary volume identifier (an a-/d-character
// field) is padded with spaces as ECMA-119 §8.4.6 requires, not NULs; and
// the image is padded to the volume space size recorded in the primary
// volume descriptor (a whole number of 2048-byte sectors).
func normalize(f *os.File) error {
	pvd := make([]byte, 2048)
	if _, err := f.ReadAt(pvd, 16*2048); err != nil {
		return fmt.Errorf("read primary volume descriptor: %w", err)
	}
	if pvd[0] != 1 || string(pvd[1:6]) != "CD001" {
		return fmt.Errorf("no primary volume descriptor at sector 16")
	}
	id := make([]byte, 32)
	for i := range id {
		id[i] = ' '
	}
	copy(id, VolumeID)
	if _, err := f.WriteAt(id, 16*2048+40); err != nil {
		return err
	}
	blocks := int64(binary.LittleEndian.Uint32(pvd[80:84]))
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	if want := blocks * 2048; want > size {
		size = want
	}
	if rem := size % 2048; rem != 0 {
		size += 2048 - rem
	}
	if size != fi.Size() {
		return f.Truncate(size)
	}
	return nil
}
