package hostnet

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/quote"
	"barn.dev/lib/wire"
)

// The hosts integration (Barn 0.9's `hosts install/uninstall`) publishes
// the lab's node names, FQDNs and aliases in one marked block of the hosts
// file (<EtcDir>/hosts; inside `ip netns exec NS` that is the namespace's
// own /etc/netns/NS/hosts, bind-mounted over /etc/hosts). It is a
// reversible change with the network's care:
//
//   - the manifest <StateDir>/hosts.json (0600, root) records the file's
//     prestate (existence, mode, owner, digest), whether Barn added a final
//     newline, and the exact block written, before the file is changed;
//   - a block whose text differs from the recorded one is never
//     overwritten or removed (integrity, owned_block_modified), and a
//     marked block with no manifest is never adopted (conflict);
//   - a name already mapped outside the block is refused (conflict,
//     hosts_name_taken), so Barn never shadows or duplicates a user's line;
//   - uninstall removes only the block (and the newline Barn added): when
//     nothing else changed, the file is byte-for-byte its prestate.
//
//   - the file must be the hosts file of the network namespace barn-net
//     runs in (netns.go), and the manifest records that namespace: a block
//     written in a namespace is changed and removed only from there.
//
// The file is replaced by rename when possible; when it is a mount point
// (a bind-mounted /etc/hosts in a namespace or a container, where rename
// fails with EBUSY) it is rewritten in place.

// HostsManifestSchema is the schema of hosts.json.
const HostsManifestSchema = "barn.hosts.manifest/v1"

// HostsBlockBegin and HostsBlockEnd mark the lines Barn owns in the hosts file.
const (
	HostsBlockBegin = "# BEGIN BARN MANAGED: hosts"
	HostsBlockEnd   = "# END BARN MANAGED: hosts"
)

// HostEntry is one address and the names it answers to (node name first,
// then FQDN and aliases).
type HostEntry struct {
	Address string   `json:"address"`
	Names   []string `json:"names"`
}

// HostsManifest records the hosts change Barn made.
type HostsManifest struct {
	Schema       string    `json:"schema"`
	Path         string    `json:"path"`
	Prestate     FileState `json:"prestate"`      // the file before Barn's first change
	AddedNewline bool      `json:"added_newline"` // Barn ended a file that lacked a final newline
	Block        string    `json:"block"`         // the block as written (markers included)
	Previous     string    `json:"previous"`      // the block it replaced ("" when none): intact too, for a crash between the two writes
	// Namespace is the named network namespace the block was written in
	// ("" outside one): the file is that namespace's own hosts file, so
	// only a barn-net running there may change or remove the block.
	Namespace string `json:"namespace,omitempty"`
}

// HostsPath is <EtcDir>/hosts.
func (h *Host) HostsPath() string { return filepath.Join(h.EtcDir, "hosts") }

// HostsManifestPath is <StateDir>/hosts.json.
func (h *Host) HostsManifestPath() string { return filepath.Join(h.StateDir, "hosts.json") }

// RenderHostsBlock validates entries and returns Barn's block, markers
// included, ending with a newline. Usage errors name the bad value.
func RenderHostsBlock(entries []HostEntry) (string, error) {
	var b strings.Builder
	b.WriteString(HostsBlockBegin + "\n")
	seen := map[string]string{}
	for _, e := range entries {
		if a, err := netip.ParseAddr(e.Address); err != nil || !a.Is4() {
			return "", exitcode.New(exitcode.Usage, "hosts entry address %q is not an IPv4 address", e.Address).WithReason("bad_hosts_entry")
		}
		if len(e.Names) == 0 {
			return "", exitcode.New(exitcode.Usage, "hosts entry %s has no names", e.Address).WithReason("bad_hosts_entry")
		}
		for _, n := range e.Names {
			if quote.HostName(n) != nil {
				return "", exitcode.New(exitcode.Usage, "hosts entry %s: %q is not a host name", e.Address, n).WithReason("bad_hosts_entry")
			}
			k := strings.ToLower(n)
			if prev, ok := seen[k]; ok {
				return "", exitcode.New(exitcode.Usage, "hosts entry name %q is given twice (%s and %s)", n, prev, e.Address).WithReason("bad_hosts_entry")
			}
			seen[k] = e.Address
		}
		l, err := quote.HostsLine(e.Address, e.Names) // validated above: cannot fail
		if err != nil {
			return "", err
		}
		b.WriteString(l + "\n")
	}
	b.WriteString(HostsBlockEnd + "\n")
	return b.String(), nil
}

// splitHosts finds Barn's block in content: before, the block (markers
// included, with its final newline when present) and after. found is
// false without a begin marker; an unterminated or repeated block is an
// integrity error.
func splitHosts(path, content string) (before, block, after string, found bool, err error) {
	i := markerIndex(content, HostsBlockBegin)
	if i < 0 {
		if markerIndex(content, HostsBlockEnd) >= 0 {
			return "", "", "", false, exitcode.New(exitcode.Integrity, "%s has Barn's end marker without its begin marker; fix the file by hand", path).WithReason("owned_block_modified")
		}
		return content, "", "", false, nil
	}
	rest := content[i:]
	j := markerIndex(rest, HostsBlockEnd)
	if j < 0 {
		return "", "", "", false, exitcode.New(exitcode.Integrity, "%s: Barn's block has no end marker; fix the file by hand", path).WithReason("owned_block_modified")
	}
	end := j + len(HostsBlockEnd)
	if end < len(rest) && rest[end] == '\n' {
		end++
	}
	before, block, after = content[:i], rest[:end], rest[end:]
	if markerIndex(after, HostsBlockBegin) >= 0 {
		return "", "", "", false, exitcode.New(exitcode.Integrity, "%s has two Barn blocks; fix the file by hand", path).WithReason("owned_block_modified")
	}
	return before, block, after, true, nil
}

// markerIndex is the offset of a line that is exactly marker, or -1.
func markerIndex(content, marker string) int {
	for off := 0; off < len(content); {
		line := content[off:]
		if k := strings.IndexByte(line, '\n'); k >= 0 {
			line = line[:k]
		}
		if strings.TrimRight(line, "\r") == marker {
			return off
		}
		off += len(line) + 1
	}
	return -1
}

// takenNames returns "name (line N: address)" for every name of entries
// that content (outside Barn's block) already maps.
func takenNames(path, content string, entries []HostEntry) []string {
	want := map[string]bool{}
	for _, e := range entries {
		for _, n := range e.Names {
			want[strings.ToLower(n)] = true
		}
	}
	var taken []string
	for i, line := range strings.Split(content, "\n") {
		if k := strings.IndexByte(line, '#'); k >= 0 {
			line = line[:k]
		}
		f := strings.Fields(line)
		for _, n := range f[min(1, len(f)):] {
			if want[strings.ToLower(n)] {
				taken = append(taken, fmt.Sprintf("%s (%s line %d: %s)", n, path, i+1, f[0]))
			}
		}
	}
	return taken
}

// HostsResult is what InstallHosts and UninstallHosts did.
type HostsResult struct {
	Path     string   `json:"path"`
	Manifest string   `json:"manifest"`
	Block    string   `json:"block"`    // the block now in the file ("" after uninstall)
	Changed  bool     `json:"changed"`  // the file was written
	Restored bool     `json:"restored"` // uninstall: the file is byte-for-byte its prestate
	Notes    []string `json:"notes"`
}

// PlanHosts checks an install of entries without writing: it returns the
// block and the manifest that InstallHosts would write, or the refusal.
func (h *Host) PlanHosts(entries []HostEntry) (HostsResult, error) {
	_, _, res, err := h.prepareHosts(entries)
	return res, err
}

func (h *Host) prepareHosts(entries []HostEntry) (*HostsManifest, string, HostsResult, error) {
	path := h.HostsPath()
	res := HostsResult{Path: path, Manifest: h.HostsManifestPath(), Notes: []string{}}
	block, err := RenderHostsBlock(entries)
	if err != nil {
		return nil, "", res, err
	}
	res.Block = block
	m, err := h.ReadHostsManifest()
	if err != nil {
		return nil, "", res, err
	}
	ns, err := h.sameNamespace(m)
	if err != nil {
		return nil, "", res, err
	}
	if err := h.checkHostsNamespaced(path); err != nil {
		return nil, "", res, err
	}
	cur, content, err := readHostsFile(path)
	if err != nil {
		return nil, "", res, err
	}
	before, old, after, found, err := splitHosts(path, content)
	if err != nil {
		return nil, "", res, err
	}
	switch {
	case found && m == nil:
		return nil, "", res, exitcode.New(exitcode.Conflict, "%s already has a Barn block but there is no manifest at %s; Barn does not adopt it — remove the block by hand", path, h.HostsManifestPath()).
			WithReason("hosts_block_unowned")
	case found && old != m.Block && old != m.Previous:
		return nil, "", res, exitcode.New(exitcode.Integrity, "Barn's block in %s was edited since Barn wrote it; Barn does not overwrite a changed block — undo the edit or remove the block and %s by hand", path, h.HostsManifestPath()).
			WithReason("owned_block_modified")
	}
	if taken := takenNames(path, before+after, entries); len(taken) > 0 {
		return nil, "", res, exitcode.New(exitcode.Conflict, "names already in the hosts file: %s; remove those lines or rename the nodes", strings.Join(taken, ", ")).
			WithReason("hosts_name_taken").WithDetail(taken)
	}
	next := *m0(m, path, cur)
	next.Previous, next.Block, next.Namespace = old, block, ns
	var newContent string
	if found {
		newContent = before + block + after
	} else {
		if m != nil {
			res.Notes = append(res.Notes, "Barn's block was missing from "+path+"; it is written again and the file as it is now becomes the prestate")
			next = *m0(nil, path, cur)
			next.Block, next.Namespace = block, ns
		}
		base := content
		if base != "" && !strings.HasSuffix(base, "\n") {
			base += "\n"
			next.AddedNewline = true
		}
		newContent = base + block
	}
	res.Changed = newContent != content
	return &next, newContent, res, nil
}

// m0 is the manifest to keep (m) or a new one whose prestate is cur.
func m0(m *HostsManifest, path string, cur FileState) *HostsManifest {
	if m != nil {
		c := *m
		return &c
	}
	return &HostsManifest{Schema: HostsManifestSchema, Path: path, Prestate: cur}
}

// InstallHosts writes (or replaces) Barn's block with entries, after the
// PlanHosts checks, recording the prestate in the manifest first.
func (h *Host) InstallHosts(entries []HostEntry) (HostsResult, error) {
	m, content, res, err := h.prepareHosts(entries)
	if err != nil || !res.Changed {
		if err == nil {
			res.Notes = append(res.Notes, "the block is already exactly this; nothing to do")
		}
		return res, err
	}
	if err := h.writeHostsManifest(m); err != nil {
		return res, exitcode.Wrap(exitcode.Runtime, err, "writing %s", h.HostsManifestPath())
	}
	if err := writeHostsFile(m.Path, content, m.Prestate); err != nil {
		return res, exitcode.Wrap(exitcode.Runtime, err, "writing %s", m.Path).WithNext("barn-net hosts uninstall")
	}
	m.Previous = ""
	if err := h.writeHostsManifest(m); err != nil {
		return res, exitcode.Wrap(exitcode.Runtime, err, "writing %s", h.HostsManifestPath())
	}
	return res, nil
}

// UninstallHosts removes Barn's block (and the final newline Barn added)
// and the manifest. With no manifest it changes nothing; it refuses a
// modified block (integrity) and a block it does not own (conflict).
func (h *Host) UninstallHosts(apply bool) (HostsResult, error) {
	res := HostsResult{Path: h.HostsPath(), Manifest: h.HostsManifestPath(), Notes: []string{}}
	m, err := h.ReadHostsManifest()
	if err != nil {
		return res, err
	}
	if m != nil {
		res.Path = m.Path
	}
	if _, err := h.sameNamespace(m); err != nil {
		return res, err
	}
	_, content, err := readHostsFile(res.Path)
	if err != nil {
		return res, err
	}
	before, old, after, found, err := splitHosts(res.Path, content)
	if err != nil {
		return res, err
	}
	switch {
	case m == nil && found:
		return res, exitcode.New(exitcode.Conflict, "%s has a Barn block but there is no manifest at %s; Barn removes only what it recorded — remove the block by hand", res.Path, res.Manifest).
			WithReason("hosts_block_unowned")
	case m == nil:
		res.Notes = append(res.Notes, "no manifest at "+res.Manifest+": Barn published no host names here; nothing to do")
		return res, nil
	case found && old != m.Block && old != m.Previous:
		return res, exitcode.New(exitcode.Integrity, "Barn's block in %s was edited since Barn wrote it; Barn does not remove a changed block — undo the edit, or remove the block and %s by hand", res.Path, res.Manifest).
			WithReason("owned_block_modified")
	}
	rest := content
	if found {
		rest = before + after
		if m.AddedNewline && after == "" && strings.HasSuffix(before, "\n") {
			rest = strings.TrimSuffix(before, "\n")
		}
	} else {
		res.Notes = append(res.Notes, "Barn's block is no longer in "+res.Path+"; only the manifest is removed")
	}
	res.Changed = rest != content
	res.Restored = digest([]byte(rest)) == m.Prestate.SHA256 || (!m.Prestate.Exists && rest == "")
	if !res.Restored && found {
		res.Notes = append(res.Notes, "lines outside Barn's block changed since install; they are kept as they are")
	}
	if !apply {
		return res, nil
	}
	if res.Changed {
		if !m.Prestate.Exists && rest == "" {
			err = os.Remove(res.Path)
		} else {
			err = writeHostsFile(res.Path, rest, m.Prestate)
		}
		if err != nil {
			return res, exitcode.Wrap(exitcode.Runtime, err, "writing %s", res.Path)
		}
	}
	if err := os.Remove(res.Manifest); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return res, exitcode.Wrap(exitcode.Runtime, err, "removing %s", res.Manifest)
	}
	removed, err := h.releaseStateDir()
	for _, d := range removed {
		res.Notes = append(res.Notes, "removed "+d+" (Barn created it for its manifests)")
	}
	if err != nil {
		return res, exitcode.Wrap(exitcode.Runtime, err, "removing the state directory %s", h.StateDir)
	}
	return res, nil
}

// sameNamespace returns the named network namespace Barn runs in, and
// refuses (conflict, hosts_other_namespace) when the manifest m records
// its block in another one: there the path names another file.
func (h *Host) sameNamespace(m *HostsManifest) (string, error) {
	ns, _ := h.NetNamespace()
	if m == nil || m.Namespace == ns {
		return ns, nil
	}
	where := "outside any named network namespace"
	next := "barn-net hosts uninstall (outside the namespace)"
	if m.Namespace != "" {
		where = "in network namespace " + m.Namespace
		next = "ip netns exec " + m.Namespace + " barn-net hosts uninstall"
	}
	here := "outside any named network namespace"
	if ns != "" {
		here = "in network namespace " + ns
	}
	return ns, exitcode.New(exitcode.Conflict, "Barn's hosts block (manifest %s) was written %s, and barn-net now runs %s, where %s is another file; run barn-net where the block was written",
		h.HostsManifestPath(), where, here, m.Path).WithReason("hosts_other_namespace").WithNext(next)
}

// ReadHostsManifest returns (nil, nil) when there is none; a damaged,
// linked, non-0600 or foreign-owned manifest is an integrity error.
func (h *Host) ReadHostsManifest() (*HostsManifest, error) {
	path := h.HostsManifestPath()
	b, err := readOwned(path)
	if b == nil || err != nil {
		return nil, err
	}
	var m HostsManifest
	if err := wire.DecodeStrict(b, &m); err != nil || m.Schema != HostsManifestSchema || m.Path == "" {
		return nil, exitcode.New(exitcode.Integrity, "manifest %s is damaged (%v)", path, err).WithReason("manifest_damaged")
	}
	return &m, nil
}

func (h *Host) writeHostsManifest(m *HostsManifest) error {
	b, err := wire.MarshalIndent(m)
	if err != nil {
		return err
	}
	if err := h.ensureStateDir(); err != nil {
		return err
	}
	return writeAtomic(h.HostsManifestPath(), append(b, '\n'), 0o600)
}

// readHostsFile returns the hosts file's state and content ("" when it
// does not exist). A symlink or a non-regular file is refused (conflict):
// Barn edits only the file itself.
func readHostsFile(path string) (FileState, string, error) {
	st, err := StatFile(path, false)
	if err != nil {
		return st, "", exitcode.Wrap(exitcode.Runtime, err, "reading %s", path)
	}
	if !st.Exists {
		return st, "", nil
	}
	if st.Symlink || st.Dir || st.SHA256 == "" {
		return st, "", exitcode.New(exitcode.Conflict, "%s is not a regular file (a symlink or a directory); Barn edits only a regular hosts file", path).WithReason("hosts_file_linked")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return st, "", exitcode.Wrap(exitcode.Runtime, err, "reading %s", path)
	}
	if len(b) > 4<<20 {
		return st, "", exitcode.New(exitcode.Conflict, "%s is larger than 4 MiB; Barn does not edit it", path).WithReason("hosts_file_too_large")
	}
	return st, string(b), nil
}

// writeHostsFile replaces path with content, keeping the prestate's mode
// and owner (0644 root for a file Barn creates): by rename when it can, in
// place when path is a mount point (rename gives EBUSY).
func writeHostsFile(path, content string, pre FileState) error {
	mode := uint32(0o644)
	if pre.Exists && pre.Mode != "" {
		if m, err := parseMode(pre.Mode); err == nil {
			mode = m
		}
	}
	err := writeAtomic(path, []byte(content), mode)
	if errors.Is(err, syscall.EBUSY) || errors.Is(err, syscall.EXDEV) {
		f, ferr := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		if ferr != nil {
			return ferr
		}
		if _, ferr = f.WriteString(content); ferr == nil {
			ferr = f.Sync()
		}
		if cerr := f.Close(); ferr == nil {
			ferr = cerr
		}
		return ferr
	}
	if err != nil {
		return err
	}
	if pre.Exists {
		return os.Lchown(path, pre.UID, pre.GID)
	}
	return nil
}
