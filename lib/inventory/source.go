package inventory

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/lazyre"
	"barn.dev/lib/quote"
)

// Input is one inventory as Ansible reads it: the inventory file (or every
// inventory file of an inventory directory, in Ansible's order) and the
// directory beside it whose group_vars/ and host_vars/ Ansible's
// host_group_vars plugin reads.
type Input struct {
	Name  string // the inventory as the user named it: a path, or "<stdin>"
	Files []File // parsed in this order, like Ansible's parse_source
	// Vars holds group_vars/ and host_vars/: the inventory file's
	// directory, or the inventory directory itself. nil when the
	// inventory has no directory (stdin): no vars files are read.
	Vars fs.FS
	// VarsPath names Vars in messages and in the spec's source list ("" for
	// the working directory).
	VarsPath string
}

// File is one inventory file's bytes and its name in messages.
type File struct {
	Path string
	Data []byte
}

// Bytes is an Input of one inventory document without a directory: no
// group_vars/ or host_vars/ are read (what Ansible reads for a file in a
// directory that has neither).
func Bytes(data []byte, name string) *Input {
	return &Input{Name: name, Files: []File{{Path: name, Data: data}}}
}

// Limits of what one inventory may read besides its inventory files.
const (
	maxVarsFiles = 1024     // group_vars and host_vars files
	maxVarsBytes = 64 << 20 // their total size
	maxVarsDepth = 16       // nested directories (symlink loops end here)
)

// Open reads the inventory at path the way `ansible-inventory -i path`
// does: a regular file, or a directory of inventory files (see
// readInventoryDir), with group_vars/ and host_vars/ read from the file's
// directory or the directory itself. Errors are usage class naming the
// path.
//
// A symlink is followed as Ansible follows it, and group_vars/ and
// host_vars/ are still read beside the path as given: for pigsty.yml ->
// conf/dev.yml, the ones beside pigsty.yml.
func Open(path string) (*Input, error) {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, exitcode.New(exitcode.Usage, "inventory %s does not exist", path).WithReason("no_inventory")
		}
		return nil, exitcode.Wrap(exitcode.Usage, err, "inventory %s", path)
	}
	if fi.IsDir() {
		files, err := readInventoryDir(path)
		if err != nil {
			return nil, err
		}
		return &Input{Name: path, Files: files, Vars: os.DirFS(path), VarsPath: path}, nil
	}
	if ext := filepath.Ext(path); ext != "" && !contains(yamlExtensions, ext) {
		return nil, exitcode.New(exitcode.Usage, "inventory %s: Ansible's yaml inventory plugin reads only files named .yml, .yaml, .json or without an extension, and would read this one with another plugin", path).
			WithReason("invalid_inventory").WithNext("rename it, e.g. mv " + quote.ShellIfNeeded(path) + " " + quote.ShellIfNeeded(strings.TrimSuffix(path, ext)+".yml"))
	}
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	in := &Input{Name: path, Files: []File{{Path: path, Data: data}}, Vars: os.DirFS(dir)}
	if dir != "." {
		in.VarsPath = dir
	}
	return in, nil
}

// Stdin is the Input of an inventory read from standard input. It has no
// directory, so no group_vars/ or host_vars/ are read; because Ansible
// reads the ones beside a playbook (and ansible-inventory the ones in its
// working directory), stdin is refused when workdir has either.
func Stdin(data []byte, workdir string) (*Input, error) {
	for _, sub := range []string{"group_vars", "host_vars"} {
		if _, err := os.Stat(filepath.Join(workdir, sub)); err == nil {
			return nil, exitcode.New(exitcode.Usage, "an inventory on stdin has no directory, so Barn reads no group_vars/ or host_vars/; but ./%s exists here and Ansible would read it", sub).
				WithReason("stdin_with_vars").WithNext("barn-inventory resolve -f INVENTORY (the file beside ./" + sub + ")")
		}
	}
	return Bytes(data, "<stdin>"), nil
}

// ignoredInInventoryDir is Ansible's IGNORED pattern for inventory
// directories (inventory/manager.py): hidden names, group_vars, host_vars,
// vars_plugins, and the default INVENTORY_IGNORE_EXTS (REJECT_EXTS +
// .orig, .ini, .cfg, .retry).
var ignoredInInventoryDir = lazyre.New(`^\.|^host_vars$|^group_vars$|^vars_plugins$|` +
	`(?:\.pyc|\.pyo|\.swp|\.bak|~|\.rpm|\.md|\.txt|\.rst|\.orig|\.ini|\.cfg|\.retry)$`)

// yamlExtensions are the yaml inventory plugin's and the vars loader's
// valid extensions (YAML_FILENAME_EXTENSIONS), after the bare name.
var yamlExtensions = []string{".yml", ".yaml", ".json"}

// readInventoryDir lists an inventory directory as Ansible's parse_source
// does: entries sorted by name, ignored names skipped, subdirectories
// recursively. Every other entry must be a YAML (or JSON) inventory file:
// Ansible would try its script, ini and toml plugins on anything else, and
// Barn refuses what it cannot read the same way.
func readInventoryDir(dir string) ([]File, error) {
	var files []File
	var walk func(d string, depth int) error
	walk = func(d string, depth int) error {
		if depth > maxVarsDepth {
			return exitcode.New(exitcode.Usage, "inventory directory %s is nested deeper than %d levels", d, maxVarsDepth).WithReason("invalid_inventory")
		}
		entries, err := os.ReadDir(d)
		if err != nil {
			return exitcode.Wrap(exitcode.Usage, err, "inventory directory %s", d)
		}
		for _, e := range entries { // os.ReadDir sorts by name
			if ignoredInInventoryDir.MatchString(e.Name()) {
				continue
			}
			p := filepath.Join(d, e.Name())
			isDir := e.IsDir()
			if e.Type()&fs.ModeSymlink != 0 { // Ansible's os.path.isdir follows links
				fi, err := os.Stat(p)
				isDir = err == nil && fi.IsDir()
			}
			if isDir {
				if err := walk(p, depth+1); err != nil {
					return err
				}
				continue
			}
			if ext := path.Ext(e.Name()); ext != "" && !contains(yamlExtensions, ext) {
				return exitcode.New(exitcode.Usage, "inventory directory %s holds %s, which Ansible would read with its ini, toml or script plugin; Barn reads only YAML inventories", dir, p).
					WithReason("invalid_inventory").WithNext("move " + quote.ShellIfNeeded(p) + " out of the directory or name the YAML inventory file with -f")
			}
			data, err := ReadFile(p)
			if err != nil {
				return err
			}
			if len(bytes.TrimSpace(data)) == 0 {
				continue // Ansible's ini plugin reads an empty file as nothing
			}
			files = append(files, File{Path: p, Data: data})
		}
		return nil
	}
	if err := walk(dir, 0); err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, exitcode.New(exitcode.Usage, "inventory directory %s holds no inventory file", dir).WithReason("no_inventory")
	}
	return files, nil
}

// varsFile is one group_vars or host_vars file as read.
type varsFile struct {
	Path string // as named in messages
	Data []byte
}

// varsFinder finds and reads group_vars/ and host_vars/ files the way
// Ansible's host_group_vars plugin and DataLoader.find_vars_files do.
// Problems (unreadable files, limits) go to prob; notes Ansible would not
// print but a user should see go to warn.
type varsFinder struct {
	in     *Input
	files  int
	bytes  int
	cache  map[string][]varsFile
	warned map[string]bool
	prob   func(Problem)
	warn   func(code, msg string)
}

// find returns the vars files of entity name under sub ("group_vars" or
// "host_vars"), in the order Ansible merges them (later wins): the first
// of NAME, NAME.yml, NAME.yaml, NAME.json that exists, and when that is a
// directory, every file in it with no or a valid extension, sorted by name,
// hidden and ~ backup files skipped, subdirectories without an extension
// descended recursively. Entities whose name starts with "/" have none.
func (f *varsFinder) find(sub, name string) []varsFile {
	if f.in.Vars == nil || strings.HasPrefix(name, "/") {
		return nil
	}
	key := sub + "/" + name
	if got, ok := f.cache[key]; ok {
		return got
	}
	if f.cache == nil {
		f.cache, f.warned = map[string][]varsFile{}, map[string]bool{}
	}
	f.cache[key] = nil
	fi, err := fs.Stat(f.in.Vars, sub)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		f.fail(sub, err)
		return nil
	case !fi.IsDir():
		f.note("vars_not_a_directory", f.name(sub)+" is not a directory; Ansible skips it too")
		return nil
	}
	base := path.Join(sub, name)
	if !fs.ValidPath(base) || strings.Contains(name, "\\") {
		f.prob(Problem{File: f.name(sub), Message: fmt.Sprintf("the name %q would make Ansible look for vars outside %s", name, sub), Hint: "rename the group or host"})
		return nil
	}
	candidates := append([]string{base}, base+yamlExtensions[0], base+yamlExtensions[1], base+yamlExtensions[2])
	var paths []string
	for i, p := range candidates {
		fi, err := fs.Stat(f.in.Vars, p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			f.fail(p, err)
			return nil
		}
		if fi.IsDir() {
			var ok bool
			if paths, ok = f.walk(p, 0); !ok {
				return nil
			}
		} else {
			paths = []string{p}
		}
		for _, later := range candidates[i+1:] {
			if _, err := fs.Stat(f.in.Vars, later); err == nil {
				f.note("vars_file_shadowed", fmt.Sprintf("%s is ignored: Ansible reads only the first of %s, %s.yml, %s.yaml, %s.json that exists, %s", f.name(later), name, name, name, name, f.name(p)))
			}
		}
		break
	}
	var out []varsFile
	for _, p := range paths {
		data, ok := f.read(p)
		if !ok {
			return nil
		}
		out = append(out, varsFile{Path: f.name(p), Data: data})
	}
	f.cache[key] = out
	return out
}

// walk lists a vars directory as DataLoader._get_dir_vars_files does.
func (f *varsFinder) walk(dir string, depth int) ([]string, bool) {
	if depth > maxVarsDepth {
		f.prob(Problem{File: f.name(dir), Message: fmt.Sprintf("nested deeper than %d levels (a symlink loop?)", maxVarsDepth)})
		return nil, false
	}
	entries, err := fs.ReadDir(f.in.Vars, dir)
	if err != nil {
		f.fail(dir, err)
		return nil, false
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names) // byte order is code point order, as Python's sorted()
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, ".") || strings.HasSuffix(n, "~") {
			continue
		}
		p := path.Join(dir, n)
		fi, err := fs.Stat(f.in.Vars, p) // follows symlinks, like os.path.isdir/isfile
		if errors.Is(err, fs.ErrNotExist) {
			continue // a dangling symlink is neither a file nor a directory
		}
		if err != nil {
			f.fail(p, err)
			return nil, false
		}
		ext := path.Ext(n)
		switch {
		case fi.IsDir() && ext == "":
			sub, ok := f.walk(p, depth+1)
			if !ok {
				return nil, false
			}
			out = append(out, sub...)
		case fi.Mode().IsRegular() && (ext == "" || contains(yamlExtensions, ext)):
			out = append(out, p)
		}
	}
	return out, true
}

func (f *varsFinder) read(p string) ([]byte, bool) {
	fi, err := fs.Stat(f.in.Vars, p)
	if err != nil {
		f.fail(p, err)
		return nil, false
	}
	f.files++
	f.bytes += int(fi.Size())
	msg := ""
	switch {
	case !fi.Mode().IsRegular():
		msg = "is not a regular file"
	case fi.Size() > MaxInventoryBytes:
		msg = fmt.Sprintf("is %d bytes; the limit is 4 MiB", fi.Size())
	case f.files > maxVarsFiles:
		msg = fmt.Sprintf("is one file too many: Barn reads at most %d group_vars/host_vars files", maxVarsFiles)
	case f.bytes > maxVarsBytes:
		msg = "is past the limit: the inventory's group_vars/host_vars files exceed 64 MiB together"
	}
	if msg != "" {
		f.prob(Problem{File: f.name(p), Message: msg})
		return nil, false
	}
	data, err := fs.ReadFile(f.in.Vars, p)
	if err != nil {
		f.fail(p, err)
		return nil, false
	}
	return data, true
}

func (f *varsFinder) note(code, msg string) {
	if !f.warned[msg] {
		f.warned[msg] = true
		f.warn(code, msg)
	}
}

func (f *varsFinder) name(p string) string {
	if f.in.VarsPath == "" {
		return filepath.FromSlash(p)
	}
	return filepath.Join(f.in.VarsPath, filepath.FromSlash(p))
}

func (f *varsFinder) fail(p string, err error) {
	msg := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		msg = pe.Err.Error()
	}
	f.prob(Problem{File: f.name(p), Message: "cannot read: " + msg})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
