package hostnet

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// BlockBegin and BlockEnd mark the lines Barn owns in bridge.conf.
func BlockBegin(bridge string) string { return "# BEGIN BARN MANAGED: " + bridge }

// BlockEnd is the closing marker of Barn's block.
func BlockEnd(bridge string) string { return "# END BARN MANAGED: " + bridge }

// ManagedBlock is the exact block Barn appends to bridge.conf.
func ManagedBlock(bridge string) string {
	return BlockBegin(bridge) + "\nallow " + bridge + "\n" + BlockEnd(bridge) + "\n"
}

// ACL is a parsed qemu-bridge-helper ACL file (format: qemu
// qemu-bridge-helper.c: "allow NAME|all", "deny NAME|all", "include PATH",
// "#" comments).
type ACL struct {
	Allow, Deny, Include []string
	// HasBlock: Barn's marked block is present; BlockIntact: it is exactly
	// ManagedBlock. UnmarkedAllow: an "allow <bridge>" outside the block.
	HasBlock, BlockIntact, UnmarkedAllow bool
}

// ParseACL parses bridge.conf content for bridge.
func ParseACL(content, bridge string) ACL {
	var a ACL
	inBlock := false
	var block strings.Builder
	sc := bufio.NewScanner(strings.NewReader(content))
	for sc.Scan() {
		raw := sc.Text()
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
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "allow":
			a.Allow = append(a.Allow, f[1])
			if f[1] == bridge && !inBlock {
				a.UnmarkedAllow = true
			}
		case "deny":
			a.Deny = append(a.Deny, f[1])
		case "include":
			a.Include = append(a.Include, f[1])
		}
	}
	a.BlockIntact = a.HasBlock && !inBlock && block.String() == ManagedBlock(bridge)
	return a
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

// loadACL reads path and its includes (depth ≤ 8) into one ACL; the block
// flags come from the top-level file only.
func loadACL(path, bridge string, depth int) (ACL, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return ACL{}, err
	}
	a := ParseACL(string(b), bridge)
	if depth >= 8 {
		return a, fmt.Errorf("%s: include nesting deeper than 8", path)
	}
	for _, inc := range a.Include {
		if !filepath.IsAbs(inc) {
			inc = filepath.Join(filepath.Dir(path), inc)
		}
		sub, err := loadACL(inc, bridge, depth+1)
		if err != nil {
			return a, fmt.Errorf("include %s: %w", inc, err)
		}
		a.Allow = append(a.Allow, sub.Allow...)
		a.Deny = append(a.Deny, sub.Deny...)
	}
	return a, nil
}

// WithBlock returns content with Barn's block appended.
func WithBlock(content, bridge string) string {
	if content != "" && !strings.HasSuffix(content, "\n") {
		content += "\n"
	}
	return content + ManagedBlock(bridge)
}
