package hostnet

import (
	"fmt"
	"path/filepath"
	"strings"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/quote"
)

// bridge.conf and the helper's setuid bit are the host objects every
// barn-net install on a host shares, each install with its own
// BARN_BRIDGE and BARN_NET_STATE (README: two users on one host). Only the
// first install sets the bit and each appends its block (ManagedBlock,
// naming its manifest) to the file as the installs before it left it, so
// they leave in reverse order: an uninstall that finds later installs'
// blocks after its own content is refused installed_after, naming the
// latest. The shared lock (lockShared) keeps two of them from changing
// these objects at once.

// fileUndo judges undoing write-file step s on the file as it is now:
// skip when nothing of Barn's is left to undo there (the file is as
// recorded before install; or bridge.conf, which other installs change
// too, holds no line of this install's block, as when an uninstall killed
// after restoring it was followed by an earlier install's); nil when it
// holds exactly what Barn wrote; else a refusal, installed_after
// (laterInstalls) or integrity owned_file_modified: Barn never overwrites
// a changed file.
func (h *Host) fileUndo(s Step) (skip bool, refusal error) {
	cur, err := StatFile(s.Path, s.Path == h.BridgeConf())
	if err != nil {
		return false, exitcode.Wrap(exitcode.Runtime, err, "checking %s", s.Path)
	}
	want := digest([]byte(s.Content))
	switch {
	case cur.SHA256 == want:
		return false, nil
	case sameAsPrev(cur, s.Prev):
		return true, nil
	case s.Path == h.BridgeConf():
		if own, ok := lastBlock(s.Content); ok && !holdsAnyLine(cur.Content, ManagedBlock(own.Bridge, own.Manifest)) {
			return true, nil
		}
		if err := h.laterInstalls(s, cur.Content); err != nil {
			return false, err
		}
	}
	return false, exitcode.New(exitcode.Integrity, "%s was modified since install (sha256 %s, recorded %s); Barn does not overwrite a changed file — restore Barn's content or undo the edit",
		s.Path, short(cur.SHA256), short(want)).WithReason("owned_file_modified").WithDetail(map[string]string{"path": s.Path})
}

// holdsAnyLine reports whether content has a line equal to any line of
// block (surrounding whitespace ignored, as the helper ignores it).
func holdsAnyLine(content, block string) bool {
	lines := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSuffix(block, "\n"), "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	for _, l := range strings.Split(content, "\n") {
		if lines[strings.TrimSpace(l)] {
			return true
		}
	}
	return false
}

// sharedModeInUse refuses (conflict shared_in_use: uninstall keeps it) to
// undo chmod step s of the helper's setuid bit or /etc/qemu's search bit
// while bridge.conf allows another bridge for another barn-net install
// that finished (installedElsewhere), whose unprivileged QEMUs need both. In reverse order of installs no
// uninstall meets one (laterInstalls refuses first); after a crash in a
// rollback, another install of the host can: the mode is then left as it
// is, never taken from under the other.
func (h *Host) sharedModeInUse(m *Manifest, s Step) error {
	if s.Path != h.Helper && s.Path != h.QemuConfDir() {
		return nil
	}
	conf, err := StatFile(h.BridgeConf(), true)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "checking %s", h.BridgeConf())
	}
	var others []string
	for _, b := range Blocks(conf.Content) {
		if b.Bridge != m.Bridge && h.installedElsewhere(b) {
			others = append(others, b.Bridge)
		}
	}
	if len(others) == 0 {
		return nil
	}
	was := "its mode before install"
	if s.Prev != nil {
		was = s.Prev.Mode
	}
	return exitcode.New(exitcode.Conflict, "%s stays mode %s: %s still allows %s for other barn-net installs, whose QEMUs need it",
		s.Path, s.Mode, h.BridgeConf(), strings.Join(others, ", ")).WithReason("shared_in_use").
		WithNext(fmt.Sprintf("chmod %s %s   # once no Barn install allows a bridge in %s", was, s.Path, h.BridgeConf()))
}

// lastBlock is the last of Barn's blocks in content: the one an install
// appended.
func lastBlock(content string) (Block, bool) {
	bl := Blocks(content)
	if len(bl) == 0 {
		return Block{}, false
	}
	return bl[len(bl)-1], true
}

// laterInstalls refuses, conflict installed_after, when cur is exactly
// the content bridge.conf step s wrote followed by blocks that later
// installs provably appended (laterInstallWrote), the latest last; the
// hint uninstalls the latest. Anything else (nil) is an edit.
func (h *Host) laterInstalls(s Step, cur string) error {
	tail, ok := strings.CutPrefix(cur, s.Content)
	if !ok {
		return nil
	}
	later := Blocks(tail)
	var names []string
	var exact strings.Builder
	for _, b := range later {
		if !h.laterInstallWrote(b, s) {
			return nil
		}
		names = append(names, b.Bridge)
		exact.WriteString(ManagedBlock(b.Bridge, b.Manifest))
	}
	if len(later) == 0 || exact.String() != tail {
		return nil
	}
	last := later[len(later)-1]
	return exitcode.New(exitcode.Conflict, "%s also allows %s for barn-net installs made after this one, which share it and the helper's setuid bit with it; uninstall them first, the latest first",
		s.Path, strings.Join(names, ", ")).WithReason("installed_after").
		WithNext(fmt.Sprintf("BARN_BRIDGE=%s BARN_NET_STATE=%s barn-net uninstall --yes", quote.ShellIfNeeded(last.Bridge), quote.ShellIfNeeded(filepath.Dir(last.Manifest)))).
		WithDetail(names)
}

// otherManifest reads the manifest block b names, when it is another
// state directory's (an absolute path to a network.json that is not
// this install's) and records an install on b's bridge; else nil.
func (h *Host) otherManifest(b Block) *Manifest {
	if !filepath.IsAbs(b.Manifest) || filepath.Base(b.Manifest) != filepath.Base(h.ManifestPath()) || filepath.Clean(b.Manifest) == h.ManifestPath() {
		return nil
	}
	other := *h
	other.StateDir = filepath.Dir(b.Manifest)
	m, err := other.ReadManifest()
	if err != nil || m == nil || m.Bridge != b.Bridge {
		return nil
	}
	return m
}

// installedElsewhere reports whether b is the block of another install
// that finished (its manifest says installed).
func (h *Host) installedElsewhere(b Block) bool {
	m := h.otherManifest(b)
	return m != nil && m.Status == StatusInstalled
}

// laterInstallWrote reports whether b's manifest (an absolute path to
// another state directory's network.json) records an install on bridge
// b.Bridge whose bridge.conf step, applied or in flight, wrote s's file
// on top of s's content, ending with b. A block copied by hand, or one
// naming a manifest of another file, is not a later install.
func (h *Host) laterInstallWrote(b Block, s Step) bool {
	m := h.otherManifest(b)
	if m == nil {
		return false
	}
	n := m.Applied
	if m.Status == StatusInstalling && n < len(m.Steps) {
		n++ // the step a crash left in flight
	}
	for _, st := range m.Steps[:n] {
		if st.Kind == KindWriteFile && st.Path == s.Path && strings.HasPrefix(st.Content, s.Content) && strings.HasSuffix(st.Content, ManagedBlock(b.Bridge, b.Manifest)) {
			return true
		}
	}
	return false
}
