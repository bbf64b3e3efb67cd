package guest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/quote"
	"barn.dev/lib/safefile"
)

// Markers of the ~/.ssh integration. A fragment Barn writes starts with
// FragmentBegin and ends with FragmentEnd, a space and "sha256=" with the
// SHA-256 (hex) of every byte before that line: proof that the file is
// exactly what Barn wrote (see fragmentProof).
const (
	FragmentBegin = "# barn:begin"
	FragmentEnd   = "# barn:end"
	fragmentSeal  = FragmentEnd + " sha256="
	IncludeMarker = "# barn:include"
	// CreatedMarker starts a fragment line recording a path Install
	// created (~/.ssh, ~/.ssh/config), which Remove deletes again when
	// Barn's removal leaves it empty.
	CreatedMarker  = "# barn:created "
	DefaultName    = "barn"  // fragment ~/.ssh/barn_config
	maxConfigBytes = 1 << 20 // files over 1 MiB are refused
)

// HostEntry is one node in the ssh-config fragment.
type HostEntry struct {
	Node         string   `json:"node"`
	Aliases      []string `json:"aliases"`
	Address      string   `json:"address"` // private address (not used by the fragment)
	Port         int      `json:"port"`    // management SSH port on 127.0.0.1
	User         string   `json:"user"`
	IdentityFile string   `json:"identity_file"`
	KnownHosts   string   `json:"known_hosts"`
	HostKeyAlias string   `json:"host_key_alias"`
	// Excluded are the entry's names (Node or Aliases) the fragment
	// leaves out, at the user's request (--exclude): names the user's
	// own ssh configuration keeps.
	Excluded []string `json:"excluded,omitempty"`
}

// Names are the names the entry's Host block answers for: Node, then
// Aliases, less Excluded.
func (e HostEntry) Names() []string {
	var out []string
	for _, n := range append([]string{e.Node}, e.Aliases...) {
		if !slices.Contains(e.Excluded, n) {
			out = append(out, n)
		}
	}
	return out
}

// fragmentPins are the options of every Host block besides the
// per-node ones: everything Barn relies on is set here, because in
// ssh_config the first value obtained wins and the fragment is included
// at the top of ~/.ssh/config, so a user's own "Host *" or
// "Host 10.10.10.*" block cannot redirect the connection (a jump host, a
// proxy, canonicalisation, another address family or source address),
// reuse another instance's master connection, trust another host key
// (global known_hosts, DNS, localhost exemption, hashed or updated
// entries), authenticate otherwise, expose the user's agent or X display
// to the guest, run a local command, or break the session (no session,
// a forced tty, backgrounding, algorithms the guest does not speak). An
// algorithm list "-barn-default" removes nothing from ssh's compiled-in
// defaults: it pins them. The command line still comes first (ssh -A,
// -L, -N, -t work as asked).
//
// Not pinned, since ssh_config accumulates them and has no way to clear
// them: IdentityFile and CertificateFile (the user's are offered after
// Barn's key, which authenticates first), LocalForward, RemoteForward and
// DynamicForward (ClearAllForwardings would clear -L/-R given on the
// command line too), SendEnv and SetEnv; a "Match exec" command of the
// user's still runs while ssh evaluates it.
var fragmentPins = []string{
	"IdentitiesOnly yes",
	"PubkeyAuthentication yes",
	"PreferredAuthentications publickey",
	"GSSAPIAuthentication no",
	"GSSAPIDelegateCredentials no",
	"StrictHostKeyChecking accept-new",
	"GlobalKnownHostsFile none",
	"NoHostAuthenticationForLocalhost no",
	"HashKnownHosts no",
	"CheckHostIP no",
	"UpdateHostKeys no",
	"KnownHostsCommand none",
	"VerifyHostKeyDNS no",
	"HostKeyAlgorithms -barn-default",
	"KexAlgorithms -barn-default",
	"Ciphers -barn-default",
	"MACs -barn-default",
	"PubkeyAcceptedAlgorithms -barn-default",
	"AddressFamily inet",
	"BindAddress 127.0.0.1",
	"ProxyJump none",
	"ProxyCommand none",
	"ControlMaster no",
	"ControlPath none",
	"CanonicalizeHostname no",
	"ForwardAgent no",
	"ForwardX11 no",
	"ForwardX11Trusted no",
	"Tunnel no",
	"PermitLocalCommand no",
	"RemoteCommand none",
	"SessionType default",
	"RequestTTY auto",
	"StdinNull no",
	"ForkAfterAuthentication no",
}

// RenderFragment returns the marked, sealed fragment: one Host block per node
// (patterns: HostEntry.Names; none left: no block) reaching it address-free through the
// management port forward on 127.0.0.1, with HostName, Port, User,
// IdentityFile, UserKnownHostsFile and HostKeyAlias plus fragmentPins.
// Values are written with quote.SSHWord/SSHPath; one they cannot carry is
// a usage error naming it.
func RenderFragment(entries []HostEntry) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(FragmentBegin + "\n# Managed by barn-node ssh-config; do not edit (an edited copy is neither overwritten nor removed).\n" +
		"# Every Host block pins what Barn relies on; an algorithm list \"-barn-default\" removes nothing (ssh's own defaults).\n")
	for _, e := range entries {
		var patterns []string
		if len(e.Names()) == 0 {
			continue
		}
		for _, n := range e.Names() {
			w, err := quote.SSHWord(n)
			if err != nil {
				return nil, err
			}
			patterns = append(patterns, w)
		}
		user, err := quote.SSHWord(e.User)
		if err != nil {
			return nil, err
		}
		key, err := quote.SSHPath(e.IdentityFile)
		if err != nil {
			return nil, err
		}
		known, err := quote.SSHPath(e.KnownHosts)
		if err != nil {
			return nil, err
		}
		alias, err := quote.SSHWord(e.HostKeyAlias)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "Host %s\n", strings.Join(patterns, " "))
		fmt.Fprintf(&b, "  HostName 127.0.0.1\n  Port %d\n  User %s\n  IdentityFile %s\n  UserKnownHostsFile %s\n  HostKeyAlias %s\n",
			e.Port, user, key, known, alias)
		for _, p := range fragmentPins {
			b.WriteString("  " + p + "\n")
		}
	}
	return seal(b.Bytes()), nil
}

// seal returns body (FragmentBegin through the last Host block, with or
// without an end line) closed by the end line carrying its hash.
func seal(body []byte) []byte {
	lines := splitLines(body)
	if n := len(lines); n > 0 && strings.HasPrefix(lines[n-1], FragmentEnd) {
		lines = lines[:n-1]
	}
	content := joinLines(lines)
	sum := sha256.Sum256(content)
	return append(content, fragmentSeal+hex.EncodeToString(sum[:])+"\n"...)
}

// proof says how far a fragment on disk is proven Barn's.
type proof int

const (
	unmarked proof = iota // no begin or no end marker: not Barn's
	edited                // Barn's markers and seal, but the content changed since
	unsealed              // begin and a bare end marker: a development build's, never read
	sealed                // exactly what Barn wrote
)

// fragmentProof classifies fragment bytes (see proof).
func fragmentProof(b []byte) proof {
	lines := splitLines(b)
	if len(lines) < 2 || lines[0] != FragmentBegin || !bytes.HasSuffix(b, []byte("\n")) {
		return unmarked
	}
	last := lines[len(lines)-1]
	switch {
	case last == FragmentEnd:
		return unsealed
	case !strings.HasPrefix(last, fragmentSeal):
		return unmarked
	case bytes.Equal(seal(b), b):
		return sealed
	}
	return edited
}

// SSHConfigPaths are the files the integration touches.
type SSHConfigPaths struct {
	Dir      string // ~/.ssh
	Config   string // ~/.ssh/config
	Fragment string // ~/.ssh/<name>_config
}

// Paths returns the integration paths for home and fragment name ("" means
// DefaultName).
func Paths(home, name string) SSHConfigPaths {
	if name == "" {
		name = DefaultName
	}
	dir := filepath.Join(home, ".ssh")
	return SSHConfigPaths{Dir: dir, Config: filepath.Join(dir, "config"), Fragment: filepath.Join(dir, name+"_config")}
}

// IncludeLine is the line ~/.ssh/config needs (quote.SSHInclude: the
// fragment's path as a glob that matches only it).
func (p SSHConfigPaths) IncludeLine() (string, error) {
	inc, err := quote.SSHInclude(p.Fragment)
	if err != nil {
		return "", err
	}
	return "Include " + inc, nil
}

// InstallResult says what Install changed.
type InstallResult struct {
	Fragment       string `json:"fragment"`
	Config         string `json:"config"`
	FragmentChange string `json:"fragment_change"` // created, updated, unchanged
	IncludeChange  string `json:"include_change"`  // inserted, moved, present
	// Created lists what Barn created for the integration (this time or
	// before), as recorded in the fragment.
	Created []string `json:"created"`
}

// Install publishes fragment (from RenderFragment) at p.Fragment (0600)
// and inserts the marked Include block at the top of p.Config (creating it
// 0600 when missing): ssh_config keeps the first value it obtains, so only
// there do the fragment's options win over the user's own, top-level
// options included. A marked Include that options have since been put
// above is moved back to the top ("moved"). What it creates (p.Dir, 0700,
// and p.Config) is recorded in the fragment as "# barn:created PATH"
// lines, kept across later installs, so Remove can leave ~/.ssh as it was.
//
// Refused (conflict, the file untouched): an existing fragment without
// Barn's markers (reason "ssh_config_unmarked") or edited since Barn
// sealed it ("ssh_config_edited"), an unmarked Include of the
// fragment in the config ("ssh_config_unmarked"), files over 1 MiB
// ("ssh_config_too_large"), and a symlinked or hard-linked config
// ("ssh_config_linked": the fragment is still published, and the message
// carries the line to add by hand). A fragment with a bare end marker is
// refused as a development build's (unsealedError).
func Install(p SSHConfigPaths, fragment []byte) (InstallResult, error) {
	res := InstallResult{Fragment: p.Fragment, Config: p.Config, Created: []string{}}
	include, err := p.IncludeLine()
	if err != nil {
		return res, err
	}
	var created []string
	if _, err := os.Lstat(p.Dir); errors.Is(err, fs.ErrNotExist) {
		created = append(created, p.Dir)
	}
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		return res, exitcode.Wrap(exitcode.Runtime, err, "create %s", p.Dir)
	}
	old, err := readSmall(p.Fragment)
	if err == nil && fragmentProof(old) == sealed {
		created = append(recordedCreated(old), created...)
	}
	if _, err := os.Lstat(p.Config); errors.Is(err, fs.ErrNotExist) {
		created = append(created, p.Config)
	}
	fragment = seal(withCreated(fragment, created))
	res.Created = append(res.Created, created...)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		res.FragmentChange = "created"
	case err != nil:
		return res, err
	case fragmentProof(old) == unmarked:
		return res, exitcode.New(exitcode.Conflict, "%s exists and was not written by Barn (no %s/%s markers); refusing to overwrite it", p.Fragment, FragmentBegin, FragmentEnd).
			WithReason("ssh_config_unmarked").WithNext("mv " + p.Fragment + " " + p.Fragment + ".bak")
	case fragmentProof(old) == edited:
		return res, editedError(p)
	case fragmentProof(old) == unsealed:
		return res, unsealedError(p)
	case bytes.Equal(old, fragment):
		res.FragmentChange = "unchanged"
	default:
		res.FragmentChange = "updated"
	}
	if res.FragmentChange != "unchanged" {
		if err := writeAtomic(p.Fragment, fragment, 0o600); err != nil {
			return res, err
		}
	}
	cfg, mode, err := readConfig(p, include)
	if err != nil {
		return res, err
	}
	lines := splitLines(cfg)
	res.IncludeChange = "inserted"
	if i := markedInclude(lines, include); i >= 0 {
		if onlyComments(lines[:i]) {
			res.IncludeChange = "present"
			return res, nil
		}
		lines, res.IncludeChange = withoutBlock(lines, i), "moved"
	} else if unmarkedInclude(lines, p) {
		return res, exitcode.New(exitcode.Conflict, "%s already includes %s without Barn's %q marker; refusing to edit it", p.Config, p.Fragment, IncludeMarker).
			WithReason("ssh_config_unmarked")
	}
	block := []string{IncludeMarker, include}
	if len(lines) > 0 {
		block = append(block, "")
	}
	if err := writeAtomic(p.Config, joinLines(append(block, lines...)), mode); err != nil {
		return res, err
	}
	return res, nil
}

// onlyComments reports whether lines hold nothing but comments and blank
// lines (so an Include after them is still the first option).
func onlyComments(lines []string) bool {
	for _, l := range lines {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
			return false
		}
	}
	return true
}

// withoutBlock removes the marked Include block starting at line i and the
// blank line Install put after it.
func withoutBlock(lines []string, i int) []string {
	end := i + 2
	if end < len(lines) && lines[end] == "" {
		end++
	}
	return append(append([]string{}, lines[:i]...), lines[end:]...)
}

// RemoveResult says what Remove changed.
type RemoveResult struct {
	Fragment        string   `json:"fragment"`
	Config          string   `json:"config"`
	FragmentRemoved bool     `json:"fragment_removed"`
	IncludeRemoved  bool     `json:"include_removed"`
	CreatedRemoved  []string `json:"created_removed"` // what Install had created, now empty and removed
	CreatedKept     []string `json:"created_kept"`    // what Install had created, kept because it holds something else now
	// IncludeLeft is FILE:LINE of an Include of the fragment Barn left in
	// a linked config it does not edit (now matching nothing; delete it
	// by hand); "" when there is none.
	IncludeLeft string `json:"include_left,omitempty"`
}

// Remove deletes the marked Include block from p.Config and the sealed
// fragment, then what the fragment records Install created (p.Config,
// p.Dir) when that is now empty. Only a fragment exactly as Barn sealed it
// is deleted; anything else is refused before any file is changed
// (conflict; the fragment and the Include kept): no begin or end marker
// ("ssh_config_unmarked"), content changed since ("ssh_config_edited"), a
// fragment with a bare end marker (unsealedError). A linked config is
// never edited (as Install): removeLinked. Absent files are fine: with
// nothing of Barn's anywhere, Remove succeeds and changes nothing.
func Remove(p SSHConfigPaths) (RemoveResult, error) {
	res := RemoveResult{Fragment: p.Fragment, Config: p.Config, CreatedRemoved: []string{}, CreatedKept: []string{}}
	include, err := p.IncludeLine()
	if err != nil {
		return res, err
	}
	old, err := readSmall(p.Fragment)
	present := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return res, err
	}
	if present {
		switch fragmentProof(old) {
		case unmarked:
			return res, exitcode.New(exitcode.Conflict, "%s was not written by Barn (no %s/%s markers); leaving it and the Include", p.Fragment, FragmentBegin, FragmentEnd).
				WithReason("ssh_config_unmarked")
		case edited:
			return res, editedError(p)
		case unsealed:
			return res, unsealedError(p)
		}
	}
	var created []string
	if present {
		created = recordedCreated(old)
	}
	if fi, err := os.Lstat(p.Config); err == nil {
		if target, linked := configLink(p.Config, fi); linked {
			return removeLinked(p, res, old, present, target)
		}
	}
	cfg, mode, err := readConfig(p, include)
	if err != nil {
		return res, err
	}
	// The fragment first, re-read just before: if it changed since the
	// check above, nothing has been edited yet. An Include left naming no
	// file (a crash in between) is harmless: ssh skips an Include that
	// matches nothing.
	if present {
		if err := removeIfSame(p.Fragment, old); err != nil {
			return res, err
		}
		res.FragmentRemoved = true
	}
	lines := splitLines(cfg)
	if i := markedInclude(lines, include); i >= 0 {
		if err := writeAtomic(p.Config, joinLines(withoutBlock(lines, i)), mode); err != nil {
			return res, err
		}
		res.IncludeRemoved = true
	}
	if !res.FragmentRemoved {
		return res, nil // no record of what Barn created: nothing more is Barn's
	}
	// The config before the directory: each only when empty.
	for _, path := range []string{p.Config, p.Dir} {
		if !slices.Contains(created, path) {
			continue
		}
		removed, err := removeIfEmpty(path)
		switch {
		case err != nil:
			return res, exitcode.Wrap(exitcode.Runtime, err, "remove %s", path)
		case removed:
			res.CreatedRemoved = append(res.CreatedRemoved, path)
		default:
			res.CreatedKept = append(res.CreatedKept, path)
		}
	}
	return res, nil
}

// removeLinked is Remove for a symlinked or hard-linked config, which
// Barn never edits (Install never wrote it): the sealed fragment goes,
// and an Include of it that the user added to the link's target by hand
// stays, reported as IncludeLeft (it matches nothing now, which ssh
// skips silently).
func removeLinked(p SSHConfigPaths, res RemoveResult, old []byte, present bool, target string) (RemoveResult, error) {
	if present {
		if err := removeIfSame(p.Fragment, old); err != nil {
			return res, err
		}
		res.FragmentRemoved = true
	}
	if b, err := os.ReadFile(target); err == nil && len(b) <= maxConfigBytes {
		if n := includeIn(b, p); n > 0 {
			res.IncludeLeft = fmt.Sprintf("%s:%d", target, n)
		}
	}
	return res, nil
}

// unsealedError refuses (integrity, 7) a fragment whose end marker
// carries no hash: only development builds before Barn's first release
// wrote one, and Barn does not read formats no release wrote. Nothing
// proves it holds only what Barn wrote, so the user checks and removes it.
func unsealedError(p SSHConfigPaths) error {
	return exitcode.New(exitcode.Integrity, "%s was written by a development build of Barn (its %s line has no content hash); this Barn does not read it and leaves it and the Include", p.Fragment, FragmentEnd).
		WithReason("dev_build_format").WithNext("check " + p.Fragment + ", remove it and its Include block from " + p.Config + ", then barn-node ssh-config --install")
}

// editedError is the refusal of a sealed fragment whose content changed.
func editedError(p SSHConfigPaths) error {
	return exitcode.New(exitcode.Conflict, "%s was written by Barn but edited since (its content no longer matches the hash on its %s line); leaving it", p.Fragment, FragmentEnd).
		WithReason("ssh_config_edited").WithNext("mv " + p.Fragment + " " + p.Fragment + ".mine   # keep your edits elsewhere (Include them from ~/.ssh/config)")
}

// removeIfSame deletes path if it still holds exactly want (re-read just
// before, so a write since Remove's check is not lost).
func removeIfSame(path string, want []byte) error {
	now, err := readSmall(path)
	if err != nil {
		return err
	}
	if !bytes.Equal(now, want) {
		return exitcode.New(exitcode.Conflict, "%s changed while Barn was removing it; leaving it", path).WithReason("ssh_config_edited")
	}
	if err := os.Remove(path); err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "remove %s", path)
	}
	return nil
}

// removeIfEmpty removes an empty regular file or an empty directory (never
// following a symlink); it reports false for anything else or absent.
func removeIfEmpty(path string) (bool, error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	case fi.Mode().IsRegular() && fi.Size() == 0:
		return true, os.Remove(path)
	case fi.IsDir():
		if err := syscall.Rmdir(path); err != nil {
			if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
				return false, nil
			}
			return false, err
		}
		return true, nil
	}
	return false, nil
}

// recordedCreated returns the paths a fragment records as created.
func recordedCreated(fragment []byte) []string {
	var out []string
	for _, l := range splitLines(fragment) {
		if p, ok := strings.CutPrefix(l, CreatedMarker); ok && filepath.IsAbs(p) {
			out = append(out, p)
		}
	}
	return out
}

// withCreated returns fragment with one "# barn:created PATH" line per
// path (deduplicated, in order) after its begin marker.
func withCreated(fragment []byte, created []string) []byte {
	if len(created) == 0 {
		return fragment
	}
	lines := splitLines(fragment)
	var rec []string
	for _, c := range created {
		if l := CreatedMarker + c; !slices.Contains(rec, l) {
			rec = append(rec, l)
		}
	}
	out := append(append(append([]string{}, lines[:1]...), rec...), lines[1:]...)
	return joinLines(out)
}

// readConfig reads ~/.ssh/config, refusing links. A missing file reads
// as empty with mode 0600.
func readConfig(p SSHConfigPaths, include string) ([]byte, os.FileMode, error) {
	fi, err := os.Lstat(p.Config)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0o600, nil
	}
	if err != nil {
		return nil, 0, exitcode.Wrap(exitcode.Runtime, err, "stat %s", p.Config)
	}
	if target, linked := configLink(p.Config, fi); linked {
		return nil, 0, exitcode.New(exitcode.Conflict, "%s is %s, so Barn does not edit it; add this line at the top of %s: %s", p.Config, describeLink(p.Config, target), target, include).
			WithReason("ssh_config_linked").WithDetail(map[string]string{"include": include, "config": p.Config, "target": target})
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, exitcode.New(exitcode.Conflict, "%s is not a regular file", p.Config).WithReason("ssh_config_linked")
	}
	b, err := readSmall(p.Config)
	return b, fi.Mode().Perm(), err
}

// configLink reports whether the config (fi from Lstat) is a symlink or
// hard link, and the file to edit by hand: the symlink's final target
// (the path itself when it cannot be resolved), or the hard-linked path.
func configLink(path string, fi fs.FileInfo) (string, bool) {
	if fi.Mode()&fs.ModeSymlink != 0 {
		if t, err := filepath.EvalSymlinks(path); err == nil {
			return t, true
		}
		return path, true
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		return path, true
	}
	return path, false
}

func describeLink(path, target string) string {
	if target == path {
		return "a hard link (or a dangling symlink)"
	}
	return "a symlink to " + target
}

// includeIn returns the 1-based line of the first Include of the
// fragment (marked or not) in b, 0 when there is none.
func includeIn(b []byte, p SSHConfigPaths) int {
	for i, l := range splitLines(b) {
		if unmarkedInclude([]string{l}, p) {
			return i + 1
		}
	}
	return 0
}

func readSmall(path string) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, exitcode.Wrap(exitcode.Runtime, err, "stat %s", path)
	}
	if fi.Size() > maxConfigBytes {
		return nil, exitcode.New(exitcode.Conflict, "%s is larger than 1 MiB; refusing to edit it", path).WithReason("ssh_config_too_large")
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, exitcode.New(exitcode.Conflict, "%s is a symlink; refusing to follow it", path).WithReason("ssh_config_linked")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "read %s", path)
	}
	return b, nil
}

func markedInclude(lines []string, include string) int {
	for i := 0; i+1 < len(lines); i++ {
		if lines[i] == IncludeMarker && strings.TrimSpace(lines[i+1]) == include {
			return i
		}
	}
	return -1
}

func unmarkedInclude(lines []string, p SSHConfigPaths) bool {
	base := filepath.Base(p.Fragment)
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) >= 2 && strings.EqualFold(f[0], "include") {
			for _, a := range f[1:] {
				if a == p.Fragment || a == base || a == "~/.ssh/"+base {
					return true
				}
			}
		}
	}
	return false
}

func splitLines(b []byte) []string {
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func joinLines(lines []string) []byte {
	if len(lines) == 0 {
		return nil
	}
	return []byte(strings.Join(lines, "\n") + "\n")
}

// writeAtomic replaces path through safefile.Write, Barn's one atomic,
// durable write.
func writeAtomic(path string, data []byte, mode os.FileMode) error {
	if err := safefile.Write(path, data, mode); err != nil {
		return &exitcode.Error{Class: exitcode.Runtime, Message: err.Error(), Err: err}
	}
	return nil
}

// FragmentNames returns the names the Host lines of an installed fragment
// answer for (what --install wrote, --exclude applied), nil when there is
// no fragment.
func FragmentNames(p SSHConfigPaths) ([]string, error) {
	b, err := readSmall(p.Fragment)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range splitLines(b) {
		if rest, ok := strings.CutPrefix(l, "Host "); ok {
			out = append(out, strings.Fields(rest)...)
		}
	}
	return out, nil
}

// Refresh rewrites an installed fragment (sealed, exactly as Barn wrote
// it) with fragment, keeping what it records Install created; it never
// touches ~/.ssh/config. It returns "absent" (nothing installed: nothing
// written), "unchanged" or "updated". A fragment Barn cannot prove its
// own is refused as Install refuses it (ssh_config_unmarked,
// ssh_config_edited, ssh_config_unsealed).
func Refresh(p SSHConfigPaths, fragment []byte) (string, error) {
	old, err := readSmall(p.Fragment)
	if errors.Is(err, fs.ErrNotExist) {
		return "absent", nil
	}
	if err != nil {
		return "", err
	}
	switch fragmentProof(old) {
	case unmarked:
		return "", exitcode.New(exitcode.Conflict, "%s was not written by Barn", p.Fragment).WithReason("ssh_config_unmarked")
	case edited:
		return "", editedError(p)
	case unsealed:
		return "", unsealedError(p)
	}
	fragment = seal(withCreated(fragment, recordedCreated(old)))
	if bytes.Equal(old, fragment) {
		return "unchanged", nil
	}
	// re-read just before: a write since the check is never lost
	if now, err := readSmall(p.Fragment); err != nil || !bytes.Equal(now, old) {
		return "", exitcode.New(exitcode.Conflict, "%s changed while Barn was refreshing it; leaving it", p.Fragment).WithReason("ssh_config_edited")
	}
	if err := writeAtomic(p.Fragment, fragment, 0o600); err != nil {
		return "", err
	}
	return "updated", nil
}
