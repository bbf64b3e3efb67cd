package inventory

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/quote"
)

// DiscoveryNames are tried in order in the working directory when no file
// is given. The first existing one wins, and its errors are reported: the
// next name is never tried.
var DiscoveryNames = []string{"barn.yml", "barn.yaml", "pigsty.yml", "pigsty.yaml"}

// Discover returns the first of DiscoveryNames that exists in dir (as
// dir/name). It returns a usage error naming every candidate when none
// exists; a candidate that exists but is not a regular file still wins
// (ReadFile then reports it).
func Discover(dir string) (string, error) {
	for _, n := range DiscoveryNames {
		p := filepath.Join(dir, n)
		if _, err := os.Lstat(p); err == nil {
			return p, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", exitcode.Wrap(exitcode.Usage, err, "inventory %s", p)
		}
	}
	return "", exitcode.New(exitcode.Usage, "no inventory found in %s (looked for barn.yml, barn.yaml, pigsty.yml, pigsty.yaml)", dir).
		WithReason("no_inventory").WithNext("barn-inventory init trio")
}

// ReadFile reads an inventory file as Ansible opens it, through any
// symlink: a regular file of at most MaxInventoryBytes, not an executable
// script. Errors are usage class naming the path.
func ReadFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if _, lerr := os.Lstat(path); lerr == nil {
				return nil, exitcode.New(exitcode.Usage, "inventory %s is a symlink to nothing; Ansible cannot parse it", path).WithReason("no_inventory")
			}
			return nil, exitcode.New(exitcode.Usage, "inventory %s does not exist", path).WithReason("no_inventory")
		}
		return nil, exitcode.Wrap(exitcode.Usage, err, "inventory %s", path)
	}
	if !fi.Mode().IsRegular() {
		return nil, exitcode.New(exitcode.Usage, "inventory %s is not a regular file", path).WithReason("invalid_inventory")
	}
	if fi.Size() > MaxInventoryBytes {
		return nil, exitcode.New(exitcode.Usage, "inventory %s is %d bytes; the limit is 4 MiB", path, fi.Size()).WithReason("invalid_inventory")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Usage, err, "inventory %s", path)
	}
	defer f.Close()
	data, err := ReadLimited(f, path)
	if err == nil && fi.Mode()&0o111 != 0 && strings.HasPrefix(string(data), "#!") {
		// Ansible's script plugin comes before its yaml plugin and runs an
		// executable file with a #! line as a dynamic inventory.
		return nil, exitcode.New(exitcode.Usage, "inventory %s is executable and starts with #!, so Ansible runs it as an inventory script; Barn reads only YAML inventories", path).
			WithReason("invalid_inventory").WithNext("chmod a-x " + quote.ShellIfNeeded(path))
	}
	return data, err
}

// ReadLimited reads at most MaxInventoryBytes from r (for stdin); more is a
// usage error.
func ReadLimited(r io.Reader, source string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxInventoryBytes+1))
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "reading %s", source)
	}
	if len(data) > MaxInventoryBytes {
		return nil, exitcode.New(exitcode.Usage, "inventory %s is larger than 4 MiB", source).WithReason("invalid_inventory")
	}
	return data, nil
}
