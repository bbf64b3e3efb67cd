package hostnet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// BlockBegin and BlockEnd mark the lines Barn owns in bridge.conf.
func BlockBegin(bridge string) string { return "# BEGIN BARN MANAGED: " + bridge }

// BlockEnd is the closing marker of Barn's block.
func BlockEnd(bridge string) string { return "# END BARN MANAGED: " + bridge }

// ManagedBlock is the exact block Barn appends to bridge.conf for bridge,
// with a comment naming the manifest that records it: bridge.conf is the
// one file every barn-net install on a host shares (each with its own
// BARN_BRIDGE and BARN_NET_STATE), so one install can name another.
func ManagedBlock(bridge, manifest string) string {
	return BlockBegin(bridge) + "\n" + manifestLine(manifest) + "\nallow " + bridge + "\n" + BlockEnd(bridge) + "\n"
}

// manifestLine is the block's comment naming its manifest, Go-quoted.
func manifestLine(manifest string) string { return "# manifest: " + strconv.Quote(manifest) }

// Block is one of Barn's intact blocks in bridge.conf.
type Block struct {
	Bridge   string // the bridge it allows
	Manifest string // the manifest of the install that wrote it
}

// Blocks lists Barn's intact blocks in content, in file order.
func Blocks(content string) []Block {
	var out []Block
	for _, line := range strings.Split(content, "\n") {
		br, ok := strings.CutPrefix(strings.TrimSpace(line), BlockBegin(""))
		if !ok || br == "" {
			continue
		}
		if a := ParseACL(content, br); a.BlockIntact {
			out = append(out, Block{Bridge: br, Manifest: a.Manifest})
		}
	}
	return out
}

// The ACL syntax is qemu-bridge-helper's own, read exactly as its
// parse_acl_file (QEMU 7.2 qemu-bridge-helper.c) reads it:
//
//   - the file is read with fgets into a 4096-byte buffer: a line longer
//     than 4095 bytes is read as several lines, and a NUL byte ends the
//     line's text;
//   - leading whitespace is skipped: space, tab, newline, carriage return
//     and form feed, but not vertical tab (measured against Debian's QEMU
//     7.2 helper: its isspace is GLib's ASCII one); a line that is then
//     empty or starts with '#' is ignored (a '#' later in a line is not a
//     comment);
//   - the command ends at the line's first space, else at its first tab; a
//     line with neither is refused ("Invalid config line");
//   - the argument is the rest with surrounding whitespace removed: in
//     "allow barn0 # note" it is "barn0 # note", which names no bridge;
//   - an argument of 16 or more bytes is refused ("name too long") unless
//     the command is include;
//   - the commands are exactly allow, deny and include (case matters);
//     any other is refused ("Unknown command");
//   - "allow all" and "deny all" match every bridge; a matching deny wins
//     over any allow; with no matching allow the bridge is denied;
//   - include PATH reads PATH (relative to the helper's working directory,
//     which is QEMU's) and ignores every error there: a missing or
//     unreadable file adds nothing, a refused line ends that file with
//     the rules before it kept. There is no depth limit: an include cycle
//     recurses until the helper runs out of stack (it crashes) or of file
//     descriptors.
//
// A refused line in bridge.conf itself makes the helper refuse everything
// ("failed to parse default acl file"). The helper reads the files after
// dropping to the calling user (a setuid helper keeps only
// CAP_NET_ADMIN), so each file must be readable by that user.

// aclLineMax is the most bytes fgets(line, 4096, f) returns at once.
const aclLineMax = 4095

// ifNameSize is Linux's IFNAMSIZ: names are at most 15 bytes.
const ifNameSize = 16

// ACL is one parsed bridge.conf file.
type ACL struct {
	Allow, Deny, Include []string
	// Problem says why the helper refuses this file ("" when it does
	// not): the first refused line, its number and text. Rules after it
	// are not read.
	Problem string
	// HasBlock: Barn's marked block is present; BlockIntact: it is exactly
	// ManagedBlock for Manifest, the manifest its comment names.
	// UnmarkedAllow: an "allow <bridge>" outside the block.
	HasBlock, BlockIntact, UnmarkedAllow bool
	Manifest                             string
}

// ParseACL parses bridge.conf content for bridge as qemu-bridge-helper
// does (see above); the block flags look at whole lines.
func ParseACL(content, bridge string) ACL {
	var a ACL
	inBlock := false
	var block strings.Builder
	for i, raw := range strings.Split(strings.TrimSuffix(content, "\n"), "\n") {
		line := strings.TrimSpace(raw)
		switch {
		case line == BlockBegin(bridge):
			a.HasBlock, inBlock = true, true
			block.WriteString(line + "\n")
			continue
		case line == BlockEnd(bridge) && inBlock:
			inBlock = false
			block.WriteString(line + "\n")
			continue
		}
		if inBlock {
			block.WriteString(raw + "\n")
			if m, ok := strings.CutPrefix(raw, "# manifest: "); ok && a.Manifest == "" {
				a.Manifest, _ = strconv.Unquote(m)
			}
		}
		if a.Problem != "" {
			continue // the helper reads no further
		}
		for _, piece := range helperLines(raw + "\n") {
			cmd, arg, problem := helperLine(piece)
			if problem != "" {
				a.Problem = fmt.Sprintf("line %d %q: %s", i+1, truncate(raw), problem)
				break
			}
			switch cmd {
			case "allow":
				a.Allow = append(a.Allow, arg)
				if arg == bridge && !inBlock {
					a.UnmarkedAllow = true
				}
			case "deny":
				a.Deny = append(a.Deny, arg)
			case "include":
				a.Include = append(a.Include, arg)
			}
		}
	}
	a.BlockIntact = a.HasBlock && !inBlock && a.Manifest != "" && block.String() == ManagedBlock(bridge, a.Manifest)
	return a
}

// helperLines splits one line (with its newline) into what successive
// fgets calls return: pieces of at most aclLineMax bytes, each cut at its
// first NUL byte.
func helperLines(line string) []string {
	var out []string
	for len(line) > 0 {
		n := min(len(line), aclLineMax)
		piece := line[:n]
		line = line[n:]
		if i := strings.IndexByte(piece, 0); i >= 0 {
			piece = piece[:i]
		}
		out = append(out, piece)
	}
	return out
}

// cSpace is the helper's whitespace (no vertical tab; see above).
func cSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\f' || b == '\r'
}

// helperLine reads one fgets piece as parse_acl_file does: cmd "" for an
// ignored line, else the command and argument, or why it is refused.
func helperLine(line string) (cmd, arg, problem string) {
	i := 0
	for i < len(line) && cSpace(line[i]) {
		i++
	}
	line = line[i:]
	if line == "" || line[0] == '#' {
		return "", "", ""
	}
	sep := strings.IndexByte(line, ' ')
	if sep < 0 {
		sep = strings.IndexByte(line, '\t')
	}
	if sep < 0 {
		return "", "", "a command without an argument (the helper says \"Invalid config line\")"
	}
	cmd, arg = line[:sep], line[sep+1:]
	i, j := 0, len(arg)
	for i < j && cSpace(arg[i]) {
		i++
	}
	for j > i && cSpace(arg[j-1]) {
		j--
	}
	arg = arg[i:j]
	if cmd != "include" && len(arg) >= ifNameSize {
		return "", "", fmt.Sprintf("argument %q is %d bytes; interface names have at most %d (the helper says \"name too long\")", arg, len(arg), ifNameSize-1)
	}
	switch cmd {
	case "allow", "deny", "include":
		return cmd, arg, ""
	}
	return "", "", fmt.Sprintf("unknown command %q; the helper knows allow, deny and include", cmd)
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

// Allows reports whether the helper would let bridge be attached: a
// matching deny (or "deny all") anywhere wins over any allow.
func (a ACL) Allows(bridge string) bool {
	for _, d := range a.Deny {
		if d == bridge || d == "all" {
			return false
		}
	}
	for _, al := range a.Allow {
		if al == bridge || al == "all" {
			return true
		}
	}
	return false
}

// aclReader reads bridge.conf and its includes as the helper does for the
// user it runs as.
type aclReader struct {
	bridge string
	cwd    string // the helper's working directory, for relative includes
	open   func(string) ([]byte, error)
	notes  []string        // what the helper silently ignores
	stack  map[string]bool // includes being read
	cycle  string          // the first include cycle
}

// loadACL reads path (bridge.conf) and, recursively, its includes into one
// ACL: the rules of every file the helper reads, Problem of the top file
// (or an include cycle anywhere, which crashes the helper), and the block
// flags of the top file. read reads a file as the helper's user would
// (nil: os.ReadFile); cwd resolves relative includes. The error is the top
// file's read error. notes say what the helper ignores (an include it
// cannot read, a refused line in an include, a relative include).
func loadACL(path, bridge, cwd string, read func(string) ([]byte, error)) (ACL, []string, error) {
	if read == nil {
		read = os.ReadFile
	}
	r := &aclReader{bridge: bridge, cwd: cwd, open: read, stack: map[string]bool{}}
	b, err := read(path)
	if err != nil {
		return ACL{}, nil, err
	}
	a := ParseACL(string(b), bridge)
	r.stack[path] = true
	r.includes(&a, path)
	if a.Problem == "" && r.cycle != "" {
		a.Problem = r.cycle
	}
	return a, r.notes, nil
}

// includes adds the rules of a's includes (read from file) to a.
func (r *aclReader) includes(a *ACL, file string) {
	incs := a.Include
	for _, inc := range incs {
		p := inc
		if !filepath.IsAbs(p) {
			p = filepath.Join(r.cwd, p)
			r.notes = append(r.notes, fmt.Sprintf("%s includes the relative path %q, which the helper resolves against QEMU's working directory (here %s)", file, inc, p))
		}
		if r.stack[p] {
			if r.cycle == "" {
				r.cycle = fmt.Sprintf("%s includes %s, which is already being read (an include cycle): the helper recurses until it crashes", file, p)
			}
			continue
		}
		b, err := r.open(p)
		if err != nil {
			what := "cannot be read"
			if errors.Is(err, fs.ErrNotExist) {
				what = "does not exist"
			}
			r.notes = append(r.notes, fmt.Sprintf("%s includes %s, which %s; the helper ignores it", file, p, what))
			continue
		}
		sub := ParseACL(string(b), r.bridge)
		if sub.Problem != "" {
			r.notes = append(r.notes, fmt.Sprintf("the helper stops reading %s (included by %s) at %s; rules before it count", p, file, sub.Problem))
		}
		r.stack[p] = true
		r.includes(&sub, p)
		delete(r.stack, p)
		a.Allow = append(a.Allow, sub.Allow...)
		a.Deny = append(a.Deny, sub.Deny...)
	}
}

// WithBlock returns content with Barn's block appended.
func WithBlock(content, bridge, manifest string) string {
	if content != "" && !strings.HasSuffix(content, "\n") {
		content += "\n"
	}
	return content + ManagedBlock(bridge, manifest)
}
