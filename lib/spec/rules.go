package spec

import (
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strings"

	"barn.dev/lib/lazyre"
)

// The field rules of barn.spec/v1. Each rule is written once, here:
// barn-inventory checks every value it resolves with these functions (and
// reports a violation at the inventory's file, line and key), and
// Validate, which barn-plan, barn-node apply and the seed renderer call,
// checks a whole document with the same functions. Other packages that
// check a spec value again as defense in depth call these too, never their
// own pattern.

// Limits of a resolved spec.
const (
	MaxNodes       = 20        // managed nodes per deployment
	MaxShares      = 8         // 9p shares per node
	MinCPUs        = 1         // vCPUs per node
	MaxCPUs        = 256       //
	MinMemoryBytes = 512 << 20 // 512 MiB
	SectorBytes    = 512       // every disk size is a whole number of sectors
	DbaUser        = "dba"     // the default login user
	DbaUID         = 88        // dba's fixed uid (and its group admin's gid)
	MinUserUID     = 1000      // Debian's first uid for a normal account (adduser.conf FIRST_UID)
	MaxUserUID     = 59999     // Debian's last one (LAST_UID)
)

// Limits of the programs in the guest that consume what Barn hands them
// (issue 20: Barn never starts a node whose setup can never pass). Each is
// the consumer's own limit, with its source; the rules below check them at
// resolve (barn-inventory, with file:line) and in Validate.
const (
	// The kernel's hostname: __NEW_UTS_LEN 64 (include/uapi/linux/utsname.h),
	// glibc HOST_NAME_MAX 64; sethostname(2) fails with EINVAL beyond it,
	// and the guest's hostname is the node's FQDN when it has one.
	MaxHostnameBytes = 64
	// RFC 1035 §2.3.4: a label is at most 63 octets, a name at most 255 on
	// the wire, 253 written out; Pigsty, cloud-init and the guest resolver
	// all take host names as DNS names.
	MaxLabelBytes = 63
	MaxNameBytes  = 253
	// shadow-utils useradd (Debian 12: 4.13): a user name is at most 32
	// bytes (USER_NAME_MAX_LENGTH, utmp's ut_user[32]); glibc's
	// LOGIN_NAME_MAX is 256 but useradd refuses before that.
	MaxUserNameBytes = 32
	// xfsprogs 5.19 and later (Debian 12: 6.1.0) refuse to make a data
	// filesystem under 300 MiB: "Filesystem must be larger than 300MB."
	// fs auto is xfs in Barn's image (barn-init-disks prefers mkfs.xfs).
	MinXFSBytes = 300 << 20
	// e2fsprogs mke2fs (Debian 12: 1.47.0) fails below about 128 KiB (no room
	// for the superblock, group descriptors and inode table); 1 MiB is the
	// smallest size Barn accepts for ext4.
	MinExt4Bytes = 1 << 20
	// systemd: a unit name is at most 255 bytes (UNIT_NAME_MAX 256 with the
	// NUL, src/basic/unit-name.h). systemd-fstab-generator names a data
	// disk's mount unit `systemd-escape --path MOUNT`.mount and skips an
	// fstab line whose name is longer, so the disk would not come back
	// after a reboot.
	MaxUnitNameBytes = 255
)

// Violation is why one value breaks its field's rule: Problem says what is
// wrong ("must be at least 512 MiB"), Hint how to fix it in the inventory.
type Violation struct {
	Problem string
	Hint    string
}

func (v *Violation) Error() string { return v.Problem }

func violation(problem, hint string) *Violation { return &Violation{Problem: problem, Hint: hint} }

var (
	dnsLabelRE  = `[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?`
	nodeNameRE  = lazyre.New(`^` + dnsLabelRE + `$`)
	aliasRE     = lazyre.New(`^` + dnsLabelRE + `(?:\.` + dnsLabelRE + `)*$`)
	userNameRE  = lazyre.New(`^[a-z_][a-z0-9_-]{0,31}$`)
	diskNameRE  = lazyre.New(`^[a-z](?:[a-z0-9-]{0,30}[a-z0-9])?$`)
	guestPathRE = lazyre.New(`^/[A-Za-z0-9._/-]+$`)
	macRE       = lazyre.New(`^[0-9a-f]{2}(:[0-9a-f]{2}){5}$`)
	serialRE    = lazyre.New(`^[a-z2-7]{20}$`)
	shareTagRE  = lazyre.New(`^barn-[0-9a-f]{20}$`)
)

// SystemPaths are guest directories no data disk or share may mount on or
// overlap.
var SystemPaths = []string{"/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/root", "/run", "/sbin", "/sys", "/usr", "/var/lib/barn"}

// SystemAccounts are the login names a Debian guest already uses for
// system accounts (base-passwd's static list, plus the accounts the Barn
// image's packages create). cloud-init would reuse such an account with
// its own home and shell, so it can never be Barn's login user.
var SystemAccounts = []string{
	"root", "daemon", "bin", "sys", "sync", "games", "man", "lp", "mail", "news", "uucp", "proxy", "www-data",
	"backup", "list", "irc", "gnats", "nobody", "_apt", "messagebus", "sshd", "polkitd",
	"systemd-network", "systemd-resolve", "systemd-timesync", "systemd-coredump",
}

// SystemGroups are the group names a Debian guest already has: base-passwd's
// static group.master, systemd's sysusers groups and those the Barn image's
// packages create. useradd, as cloud-init runs it for a login user without
// a primary group, creates the user's own group and fails on one that
// exists ("group NAME exists - if you want to add this user to that group,
// use -g"), so none can be a custom login user's name.
var SystemGroups = []string{
	"root", "daemon", "bin", "sys", "adm", "tty", "disk", "lp", "mail", "news", "uucp", "man", "proxy", "kmem",
	"dialout", "fax", "voice", "cdrom", "floppy", "tape", "sudo", "audio", "dip", "www-data", "backup", "operator",
	"list", "irc", "src", "gnats", "shadow", "utmp", "video", "sasl", "plugdev", "staff", "games", "users", "nogroup",
	"systemd-journal", "systemd-network", "systemd-resolve", "systemd-timesync", "systemd-coredump", "input", "kvm",
	"render", "sgx", "netdev", "messagebus", "_ssh", "crontab", "polkitd",
}

// ValidNodeName reports whether s is a node name: 1–63 of a-z 0-9 and -,
// not starting or ending with - (one DNS label, also a safe directory
// name).
func ValidNodeName(s string) bool { return nodeNameRE.MatchString(s) }

// CheckNodeName is the node name rule (ValidNodeName).
func CheckNodeName(s string) *Violation {
	if ValidNodeName(s) {
		return nil
	}
	return violation("invalid node name", "use 1–63 of a-z 0-9 and -, not starting or ending with -")
}

// CheckAlias: an alias is a lower-case DNS name of at most 253 bytes that
// every guest's resolver and ssh read as a name of this node only: not an
// address in any form glibc's inet_aton(3) accepts ("10.10.10" is
// 10.10.0.10, "0xa" is 0.0.0.10; RFC 1123 §2.1: a top-level label is never
// all digits), and not a name the guest's /etc/hosts already gives to
// loopback (Debian's netbase: localhost, ip6-localhost, ip6-loopback) or
// RFC 6761 §6.3 reserves for it (*.localhost).
func CheckAlias(s string) *Violation {
	if len(s) > MaxNameBytes || !aliasRE.MatchString(s) {
		return violation("must be a lower-case DNS name", "use a-z 0-9 - and dots, e.g. pg.lab")
	}
	if looksLikeAddress(s) {
		return violation("reads as an IP address (inet_aton), not a host name", "use a name whose last label has a letter, e.g. pg.lab")
	}
	if loopbackName(s) {
		return violation("is a loopback name of every guest (/etc/hosts, RFC 6761)", "choose another alias")
	}
	return nil
}

// looksLikeAddress reports whether s is 1 to 4 numeric labels in the
// forms inet_aton reads (decimal, octal, 0x hex; conservatively also out
// of range) or its last label is all digits.
func looksLikeAddress(s string) bool {
	labels := strings.Split(s, ".")
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return true
	}
	if len(labels) > 4 {
		return false
	}
	for _, l := range labels {
		if h, ok := strings.CutPrefix(l, "0x"); ok {
			l = strings.Trim(h, "0123456789abcdef")
		} else {
			l = strings.Trim(l, "0123456789")
		}
		if l != "" {
			return false
		}
	}
	return true
}

func loopbackName(s string) bool {
	switch s {
	case "localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback",
		"ip6-localnet", "ip6-mcastprefix", "ip6-allnodes", "ip6-allrouters":
		return true
	}
	return strings.HasSuffix(s, ".localhost")
}

// CheckFQDN: a node's FQDN (its Pigsty nodename when that has dots) is
// empty, or a lower-case DNS name of at most 253 bytes with at least two
// labels, not an IP address, whose first label is the node's name.
func CheckFQDN(name, fqdn string) *Violation {
	if fqdn == "" {
		return nil
	}
	first, _, dotted := strings.Cut(fqdn, ".")
	switch {
	case !dotted || len(fqdn) > MaxNameBytes || !aliasRE.MatchString(fqdn):
		return violation("invalid node name: not a lower-case DNS name", "use labels of a-z 0-9 and - separated by dots, e.g. pg-meta-1.lab")
	case len(fqdn) > MaxHostnameBytes:
		return violation(fmt.Sprintf("the guest's hostname would be this FQDN, %d bytes: Linux allows %d (sethostname(2), HOST_NAME_MAX)", len(fqdn), MaxHostnameBytes),
			"shorten nodename's domain so the whole name fits in 64 bytes")
	case isIP(fqdn):
		return violation("invalid node name: an IP address, not a host name", "set nodename to a host name")
	case first != name:
		return violation("the FQDN's first label is not the node name "+name, "re-run barn-inventory resolve")
	}
	return nil
}

func isIP(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}

// CheckUserName: the login user is 1–32 of a-z 0-9 _ -, starting with a
// letter or _, and not one of SystemAccounts.
func CheckUserName(s string) *Violation {
	if !userNameRE.MatchString(s) {
		return violation("is not a valid login name", "use 1–32 of a-z 0-9 _ -, starting with a letter or _")
	}
	if slices.Contains(SystemAccounts, s) {
		return violation(fmt.Sprintf("%s is a system account of the guest and cannot be the login user", s),
			"use another name, such as the default dba")
	}
	if s != DbaUser && slices.Contains(SystemGroups, s) {
		return violation(fmt.Sprintf("%s is a system group of the guest: useradd, as cloud-init runs it, cannot create the login user's own group %s", s, s),
			"use another name, such as the default dba")
	}
	return nil
}

// CheckUID is the login user's uid rule. uid 0 means unset (the guest
// picks one) and is allowed for any user but dba. dba is always uid 88;
// any other user may have 88 (Pigsty's default) or a uid in Debian's
// range for normal accounts, MinUserUID–MaxUserUID: the others belong to
// the guest's system accounts.
func CheckUID(user string, uid int) *Violation {
	switch {
	case user == DbaUser && uid != DbaUID:
		return violation("the dba user is provisioned with uid 88", "remove node_admin_uid or set it to 88")
	case uid == 0 || uid == DbaUID || (uid >= MinUserUID && uid <= MaxUserUID):
		return nil
	}
	return violation(fmt.Sprintf("uid %d is reserved for the guest's system accounts", uid),
		fmt.Sprintf("use %d (Pigsty's default) or a uid from %d to %d", DbaUID, MinUserUID, MaxUserUID))
}

// CheckCPUs: 1–256 vCPUs.
func CheckCPUs(n int) *Violation {
	if n >= MinCPUs && n <= MaxCPUs {
		return nil
	}
	return violation(fmt.Sprintf("must be %d to %d", MinCPUs, MaxCPUs), "set vm_cpu to a whole number of vCPUs")
}

// CheckMemory: at least 512 MiB, a whole number of MiB (QEMU's -m unit).
func CheckMemory(b int64) *Violation {
	switch {
	case b < MinMemoryBytes:
		return violation("must be at least 512 MiB", "plain integers are MiB; sizes such as 4GiB also work")
	case b%(1<<20) != 0:
		return violation("memory must be a whole number of MiB (QEMU needs MiB-aligned memory)", fmt.Sprintf("write %dMiB", b>>20))
	}
	return nil
}

// CheckDiskSize: a root or data disk size is positive and a whole number
// of 512-byte sectors.
func CheckDiskSize(b int64) *Violation {
	switch {
	case b <= 0:
		return violation("a disk size must be positive", "give a size such as 64GiB")
	case b%SectorBytes != 0:
		return violation("a disk size must be a multiple of 512 bytes", "use MiB or GiB")
	}
	return nil
}

// CheckRootDiskFits: a root disk may not be smaller than its image's
// virtual size (the qcow2 overlay never shrinks its base, and Barn never
// silently grows what the inventory asked for).
func CheckRootDiskFits(rootBytes, imageVirtualBytes int64) *Violation {
	if rootBytes >= imageVirtualBytes {
		return nil
	}
	return violation(fmt.Sprintf("root disk %s is smaller than the image's virtual size %s", sizeText(rootBytes), sizeText(imageVirtualBytes)),
		fmt.Sprintf("raise vm_disk to at least %s", sizeText((imageVirtualBytes+1<<20-1)/(1<<20)*(1<<20))))
}

// CheckDiskName: a data disk name (derived from its mount path) is 1–32 of
// a-z 0-9 -, starting with a letter and not ending with -; "root" is the
// root disk's.
func CheckDiskName(s string) *Violation {
	if s != "root" && diskNameRE.MatchString(s) {
		return nil
	}
	return violation(fmt.Sprintf("derived disk name %q is invalid (1–32 of a-z 0-9 -, starting with a letter, not root)", s),
		"use a short lower-case path such as /data or /pg/data")
}

// CheckGuestPath: a data disk mount or share target is a clean absolute
// guest path other than / of A-Z a-z 0-9 . _ / -, not overlapping a
// SystemPaths entry.
func CheckGuestPath(p string) *Violation {
	if !CleanAbs(p) || !guestPathRE.MatchString(p) {
		return violation("must be a clean absolute guest path of A-Z a-z 0-9 . _ / -", "write e.g. /data")
	}
	for _, s := range SystemPaths {
		if Overlaps(p, s) {
			return violation("overlaps the system path "+s, "use another directory, e.g. /data")
		}
	}
	if u := MountUnit(p); len(u) > MaxUnitNameBytes {
		return violation(fmt.Sprintf("its systemd mount unit name would be %d bytes: systemd allows %d (UNIT_NAME_MAX), so the mount would not return after a reboot", len(u), MaxUnitNameBytes),
			"use a shorter path (each - counts 4 bytes, escaped as \\x2d)")
	}
	return nil
}

// MountUnit is the name systemd gives the mount unit of clean absolute path
// p: `systemd-escape --path p` + ".mount" (unit_name_path_escape: slashes
// trimmed and turned into -, a leading . and every byte outside
// [A-Za-z0-9:_.] written \xNN).
func MountUnit(p string) string {
	t := strings.Trim(p, "/")
	if t == "" {
		return "-.mount"
	}
	var b strings.Builder
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case c == '/':
			b.WriteByte('-')
		case c == '.' && i == 0,
			!(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == ':' || c == '_' || c == '.'):
			fmt.Fprintf(&b, `\x%02x`, c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String() + ".mount"
}

// CheckDataDiskFits: a data disk is large enough for the filesystem the
// guest makes on it: xfs (and auto, which is xfs in Barn's image) needs
// MinXFSBytes, ext4 MinExt4Bytes.
func CheckDataDiskFits(b int64, fs string) *Violation {
	least, name := int64(MinXFSBytes), "mkfs.xfs (xfsprogs 5.19+)"
	if fs == "ext4" {
		least, name = MinExt4Bytes, "mkfs.ext4"
	}
	if b >= least {
		return nil
	}
	what := fs
	if fs == "auto" {
		what = "auto (xfs in the guest)"
	}
	return violation(fmt.Sprintf("%s is too small for fs %s: %s needs at least %s", sizeText(b), what, name, sizeText(least)),
		fmt.Sprintf("give the disk at least %s, or fs: ext4", sizeText(least)))
}

// CheckHostPath: a share source is a clean absolute host path other than /.
func CheckHostPath(p string) *Violation {
	if CleanAbs(p) {
		return nil
	}
	return violation("must be a clean absolute host path (no ~, no relative parts)", "write the full path, e.g. /home/me/src")
}

// CheckFS: a data disk filesystem is auto, xfs or ext4.
func CheckFS(fs string) *Violation {
	if slices.Contains([]string{"auto", "xfs", "ext4"}, fs) {
		return nil
	}
	return violation("unknown filesystem", "write auto, xfs or ext4")
}

// CheckArch: native, amd64 or arm64.
func CheckArch(a string) *Violation {
	if slices.Contains([]string{"native", "amd64", "arm64"}, a) {
		return nil
	}
	return violation("unknown architecture", "write native, amd64 or arm64")
}

// CheckMAC: a lower-case colon-separated unicast MAC.
func CheckMAC(m string) *Violation {
	if macRE.MatchString(m) {
		return nil
	}
	return violation("not a lower-case colon-separated MAC", "re-run barn-inventory resolve: MACs are derived from the address")
}

// CheckDiskSerial: a data disk's virtio serial is 20 of [a-z2-7].
func CheckDiskSerial(s string) *Violation {
	if serialRE.MatchString(s) {
		return nil
	}
	return violation("want 20 characters [a-z2-7]", "re-run barn-inventory resolve: serials are derived from the node and disk")
}

// CheckShareTag: a 9p mount tag is "barn-" and 20 hex digits.
func CheckShareTag(s string) *Violation {
	if shareTagRE.MatchString(s) {
		return nil
	}
	return violation("want barn-<20 hex>", "re-run barn-inventory resolve: tags are derived from the share")
}

// CleanAbs reports whether p is a clean absolute path other than "/".
func CleanAbs(p string) bool {
	return strings.HasPrefix(p, "/") && path.Clean(p) == p && p != "/"
}

// Overlaps reports whether clean absolute paths a and b are equal or one
// contains the other.
func Overlaps(a, b string) bool {
	if a == b || a == "/" || b == "/" {
		return true
	}
	return strings.HasPrefix(b, a+"/") || strings.HasPrefix(a, b+"/")
}

// checkIPv4 parses an IPv4 address.
func checkIPv4(s string) (netip.Addr, *Violation) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return netip.Addr{}, violation("is not an IPv4 address", "write a dotted quad such as 10.10.10.11")
	}
	return a, nil
}

// sizeText renders bytes as the largest binary unit that divides them
// (the inventory's own spelling), else as bytes.
func sizeText(b int64) string {
	for _, u := range []struct {
		n    int64
		name string
	}{{1 << 40, "TiB"}, {1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if b != 0 && b%u.n == 0 {
			return fmt.Sprintf("%d%s", b/u.n, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", b)
}
