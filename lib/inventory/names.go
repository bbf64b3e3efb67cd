package inventory

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"

	"barn.dev/lib/human"
	"barn.dev/lib/lazyre"
	"barn.dev/lib/spec"
)

// VMKeys are exactly the vm_* variables Barn reads; any other vm_* key is
// an error.
var VMKeys = []string{"vm_skip", "vm_image", "vm_version", "vm_arch", "vm_cpu", "vm_mem", "vm_disk", "vm_disks", "vm_alias", "vm_shares"}

// NameKeys are the non-vm variables Barn reads per host.
var NameKeys = []string{"nodename", "pg_cluster", "pg_seq", "node_admin_username", "node_admin_uid"}

// ConsumedKeys lists every variable Barn reads, in explain order: NameKeys,
// VMKeys, then admin_ip (resolved per host like the others, and required
// to resolve to one value for every managed host).
func ConsumedKeys() []string {
	return append(append(append([]string{}, NameKeys...), VMKeys...), "admin_ip")
}

var (
	reFamily  = lazyre.New(`^[a-z][a-z0-9-]{0,31}$`)
	reChannel = lazyre.New(`^[a-z][a-z0-9-]{0,31}$`)
	reVersion = lazyre.New(`^[0-9A-Za-z][0-9A-Za-z._-]{0,31}$`)
)

// The node name, path and disk name rules are the spec's (one rule, one
// place: package spec).
var (
	validNodeName = spec.ValidNodeName
	overlaps      = spec.Overlaps
	cleanAbs      = spec.CleanAbs
	diskName      = spec.DiskName
)

// SplitNodename derives a node's name from a Pigsty nodename: a plain
// label is the name itself (fqdn ""); a fully qualified DNS name (labels of
// a-z 0-9 -, at most 253 characters) names the node by its first label and
// is kept whole as its FQDN, the hostname Pigsty sets (`hostname
// {{ nodename }}`). problem is "" when the nodename is valid.
func SplitNodename(nodename string) (name, fqdn, problem string) {
	if validNodeName(nodename) {
		return nodename, "", ""
	}
	first, _, dotted := strings.Cut(nodename, ".")
	if !dotted {
		return nodename, "", spec.CheckNodeName(nodename).Problem
	}
	if v := spec.CheckFQDN(first, nodename); v != nil {
		return first, nodename, v.Problem
	}
	return first, nodename, ""
}

// MACs derives a node's two MAC addresses from its IPv4 address:
// 0a:ba:<nic>:<b2>:<b3>:<b4>, where nic is 01 for the management NIC and 02
// for the private NIC and b2..b4 are the last three address bytes. 0x0a has
// the locally-administered bit set and the multicast bit clear, so these
// never collide with a vendor OUI (QEMU's own is 52:54:00).
func MACs(addr netip.Addr) (management, private string) {
	b := addr.As4()
	f := func(nic byte) string {
		return fmt.Sprintf("0a:ba:%02x:%02x:%02x:%02x", nic, b[1], b[2], b[3])
	}
	return f(1), f(2)
}

// DiskSerial is the virtio serial of data disk disk on node node: the first
// 20 characters of lower-case unpadded base32 of sha256(node \0 disk),
// alphabet [a-z2-7].
func DiskSerial(node, disk string) string {
	sum := sha256.Sum256([]byte(node + "\x00" + disk))
	s := strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:]))
	return s[:20]
}

// ShareTag is the 9p mount tag of a share: "barn-" + the first 20 hex
// characters of sha256(host \0 guest \0 readonly), readonly written
// "true"/"false" (25 bytes, below QEMU's 31-byte limit).
func ShareTag(host, guest string, readonly bool) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%s\x00%t", host, guest, readonly)))
	return "barn-" + hex.EncodeToString(sum[:])[:20]
}

// suggest returns the candidate closest to s within edit distance 2 (1 for
// names of at most 4 characters), or "".
func suggest(s string, candidates []string) string {
	best, bestD := "", 1<<30
	for _, c := range candidates {
		d := human.EditDistance(s, c)
		limit := 2
		if len(c) <= 4 || len(s) <= 4 {
			limit = 1
		}
		if d <= limit && d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// ImageSelector canonicalises an image selector given outside the
// inventory (barn-plan --image) as vm_image is: "d12" → "d12:stable",
// "d12:testing", "d12@12.1" and "local-…" stay. It returns an error and a
// hint for a selector vm_image would refuse.
func ImageSelector(s string) (string, string, error) {
	img := strings.TrimSpace(s)
	family, rest := img, ""
	if i := strings.IndexAny(img, ":@"); i >= 0 {
		family, rest = img[:i], img[i:]
	}
	switch {
	case !reFamily.MatchString(family):
		return "", "write family, family:channel or family@version, e.g. d12 or d12:stable", fmt.Errorf("invalid image selector")
	case strings.HasPrefix(rest, ":") && !reChannel.MatchString(rest[1:]):
		return "", "write family:channel, e.g. d12:stable", fmt.Errorf("invalid image channel")
	case strings.HasPrefix(rest, "@") && !reVersion.MatchString(rest[1:]):
		return "", "write family@version, e.g. d12@12", fmt.Errorf("invalid image version")
	case strings.HasPrefix(img, "local-") || rest != "":
		return img, "", nil
	}
	return img + ":stable", "", nil
}
