package imagecache

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"barn.dev/lib/catalog"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/imageref"
	"barn.dev/lib/lazyre"
	"barn.dev/lib/safefile"
	"barn.dev/lib/state"
	"barn.dev/lib/wire"
)

// localRegistryName is the import registry's file in the images directory
// (catalog.ReadLocal reads it).
const localRegistryName = "local-images.json"

var importNameRE = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,191}$`)

// ImportOptions are the flags of `barn-repo import`.
type ImportOptions struct {
	SHA256     string // required: the digest the operator expects
	Name       string // optional "local-NAME"; requires Boot and SourceUser
	Boot       string
	SourceUser string
}

// Import copies file into images/local/<basename> (0444) after checking the
// qcow2 magic and header, the file name, and that its SHA-256 equals
// o.SHA256 (integrity otherwise). The same basename with other bytes is a
// usage error, reason "image_name_taken"; so is a name already in use.
// Import does not clean credentials, install cloud-init or prove a boot.
func Import(ctx context.Context, root *state.Root, file string, o ImportOptions) (catalog.LocalImage, error) {
	var li catalog.LocalImage
	base := filepath.Base(file)
	want, err := checkImport(base, o)
	if err != nil {
		return li, err
	}
	m, err := MeasureFile(file)
	if err != nil {
		return li, err
	}
	if m.SHA256 != want {
		return li, exitcode.New(exitcode.Integrity, "%s has sha256 %s, not the expected %s", file, m.SHA256, want).WithReason("image_mismatch")
	}
	imagesDir, err := root.EnsureImagesDir()
	if err != nil {
		return li, err
	}
	lock, err := root.LockImages(ctx, "barn-repo import", true)
	if err != nil {
		return li, err
	}
	defer lock.Unlock()
	reg, err := catalog.ReadLocal(imagesDir)
	if err != nil {
		return li, err
	}
	li = catalog.LocalImage{File: LocalDir + "/" + base, SHA256: m.SHA256, SizeBytes: m.SizeBytes, VirtualSize: m.Header.VirtualSize,
		Release: "local-" + m.SHA256[:12], Name: o.Name, Boot: o.Boot, SourceUser: o.SourceUser, Arch: catalog.NativeArch()}
	if li, err = registered(reg, base, li, o); err != nil {
		return li, err
	}
	if err := placeImport(file, filepath.Join(imagesDir, LocalDir, base), li.Identity("")); err != nil {
		return li, err
	}
	reg.Images[base] = li
	b, err := wire.MarshalIndent(reg)
	if err != nil {
		return li, exitcode.Wrap(exitcode.Runtime, err, "encoding local registry")
	}
	if err := safefile.Write(filepath.Join(imagesDir, localRegistryName), append(b, '\n'), 0o600); err != nil {
		return li, exitcode.Wrap(exitcode.Runtime, err, "writing local registry")
	}
	return li, nil
}

// checkImport checks the import's file name (base) and options and
// returns the expected digest, lower-cased.
func checkImport(base string, o ImportOptions) (string, error) {
	if !importNameRE.MatchString(base) || !(strings.HasSuffix(base, ".qcow2") || strings.HasSuffix(base, ".img")) {
		return "", exitcode.New(exitcode.Usage, "%s: file name must match %s and end in .qcow2 or .img", base, importNameRE).WithReason("bad_import_name")
	}
	if (o.Name != "" || o.Boot != "" || o.SourceUser != "") && (o.Name == "" || o.Boot == "" || o.SourceUser == "") {
		return "", exitcode.New(exitcode.Usage, "--name, --boot and --source-user go together")
	}
	if o.Name != "" && (!strings.HasPrefix(o.Name, "local-") || len(o.Name) > 32 || !regexp.MustCompile(`^local-[a-z0-9-]+$`).MatchString(o.Name)) {
		return "", exitcode.New(exitcode.Usage, "--name %q must be local-NAME (lower-case letters, digits, dashes; at most 32 characters)", o.Name)
	}
	if o.Boot != "" && o.Boot != "bios" && o.Boot != "uefi" {
		return "", exitcode.New(exitcode.Usage, "--boot %q must be bios or uefi", o.Boot)
	}
	want := strings.ToLower(o.SHA256)
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(want) {
		return "", exitcode.New(exitcode.Usage, "--sha256 must be 64 hex digits")
	}
	return want, nil
}

// registered reconciles the new entry li for base with the import
// registry: the same bytes under the same name re-import (keeping the
// recorded entry when no name is given); other bytes, a renaming or a name
// another file holds are image_name_taken.
func registered(reg *catalog.LocalRegistry, base string, li catalog.LocalImage, o ImportOptions) (catalog.LocalImage, error) {
	if prev, ok := reg.Images[base]; ok {
		if prev.SHA256 != li.SHA256 {
			return li, exitcode.New(exitcode.Usage, "an imported image named %s with other bytes exists", base).WithReason("image_name_taken")
		}
		if prev.Name != "" && o.Name != "" && prev.Name != o.Name {
			return li, exitcode.New(exitcode.Usage, "%s is already imported as %s; names are immutable", base, prev.Name).WithReason("image_name_taken")
		}
		if o.Name == "" {
			li = prev
		}
	}
	if o.Name != "" {
		if other, ok := reg.Lookup(o.Name); ok && other.File != li.File {
			return li, exitcode.New(exitcode.Usage, "name %s is already used by %s", o.Name, other.File).WithReason("image_name_taken")
		}
	}
	return li, nil
}

// placeImport copies file to dest through a staging file verified against
// id, unless dest already holds exactly id.
func placeImport(file, dest string, id imageref.Identity) error {
	err := VerifyCached(dest, id)
	if err == nil {
		return nil
	}
	if !os.IsNotExist(err) {
		return err
	}
	if err := state.EnsurePrivateDir(filepath.Dir(dest)); err != nil {
		return err
	}
	staging := StagingPath(dest, id)
	if err := copyFile(file, staging); err != nil {
		return err
	}
	m2, err := MeasureFile(staging)
	if err == nil {
		err = m2.Check(id, file)
	}
	if err != nil {
		return discardStaging(staging, m2.ID, err)
	}
	return publish(staging, dest)
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "reading %s", from)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "creating %s", to)
	}
	defer out.Close()
	if _, err := io.CopyBuffer(out, onlyReader{in}, make([]byte, bufSize)); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "copying %s", from)
	}
	return out.Sync()
}
