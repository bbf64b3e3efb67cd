package hostnet

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"barn.dev/lib/exitcode"
)

// ReportSchema is the schema of a preflight report.
const ReportSchema = "barn.net.preflight/v1"

// Severity of a finding: an error makes the network unusable.
const (
	SevError   = "error"
	SevWarning = "warning"
)

// Finding codes: one per distinct cause, each with its own fix.
const (
	FindHelperMissing      = "helper_missing"
	FindHelperUnsafe       = "helper_unsafe"
	FindHelperNotSetuid    = "helper_not_setuid"
	FindBridgeConfMissing  = "bridge_conf_missing"
	FindBridgeConfBad      = "bridge_conf_unreadable"
	FindBridgeConfInvalid  = "bridge_conf_invalid"
	FindBridgeConfIgnored  = "bridge_conf_ignored"
	FindBridgeNotAllowed   = "bridge_not_allowed"
	FindBridgeAbsent       = "bridge_absent"
	FindBridgeNotBridge    = "bridge_not_a_bridge"
	FindBridgeDown         = "bridge_down"
	FindBridgeAddrMissing  = "bridge_address_missing"
	FindBridgeCIDRMismatch = "bridge_cidr_mismatch"
	FindTunMissing         = "tun_missing"
	FindTunDenied          = "tun_not_accessible"
)

// Finding is one observed problem and the one action that fixes it.
type Finding struct {
	Code     string `json:"code"`
	Severity string `json:"severity"`
	Message  string `json:"message"`
	Fix      string `json:"fix"`
}

// Report answers "can this user attach a QEMU NIC to the bridge now".
type Report struct {
	Schema      string    `json:"schema"`
	Usable      bool      `json:"usable"`
	Bridge      string    `json:"bridge"`
	CIDR        string    `json:"cidr"`
	HostAddress string    `json:"host_address"`
	Helper      string    `json:"helper"`
	BridgeConf  string    `json:"bridge_conf"`
	Findings    []Finding `json:"findings"`
}

// PreflightEnv is Preflight with the documented environment overrides
// (BARN_NET_ETC, BARN_NET_HELPER, BARN_BRIDGE when bridge is "", …).
func PreflightEnv(ctx context.Context, getenv func(string) string, cidr, bridge string) (Report, error) {
	h := FromEnv(getenv)
	if bridge == "" {
		bridge = h.bridge()
	}
	return h.Preflight(ctx, cidr, bridge)
}

// Preflight is the package-level Preflight against h's paths.
func (h *Host) Preflight(ctx context.Context, cidr, bridge string) (Report, error) {
	if bridge == "" {
		bridge = h.bridge()
	}
	sn, err := ParseSubnet(or(cidr, DefaultCIDR))
	if err != nil {
		return Report{}, exitcode.New(exitcode.Usage, "%v", err).WithReason("bad_cidr")
	}
	r := Report{Schema: ReportSchema, Bridge: bridge, CIDR: sn.String(), HostAddress: sn.HostAddr().String(),
		Helper: h.Helper, BridgeConf: h.BridgeConf(), Findings: []Finding{}}
	add := func(code, sev, fix, format string, args ...any) {
		r.Findings = append(r.Findings, Finding{Code: code, Severity: sev, Message: fmt.Sprintf(format, args...), Fix: fix})
	}
	if err := ctx.Err(); err != nil {
		return r, err
	}
	h.checkHelper(add)
	h.checkACL(bridge, add)
	links, lerr := h.Link.Links()
	if lerr != nil {
		add(FindBridgeAbsent, SevError, "barn-net status", "cannot list links to find bridge %s: %v", bridge, lerr)
	} else {
		checkBridge(links, bridge, sn, add)
	}
	h.checkTun(add)
	r.Usable = true
	for _, f := range r.Findings {
		if f.Severity == SevError {
			r.Usable = false
		}
	}
	if !r.Usable {
		first := r.Findings[0]
		for _, f := range r.Findings {
			if f.Severity == SevError {
				first = f
				break
			}
		}
		return r, exitcode.New(exitcode.Capability, "private network %s on %s is not usable: %s", r.CIDR, bridge, first.Message).
			WithReason("network_unusable").WithNext("barn-net install").WithDetail(r)
	}
	return r, nil
}

func (h *Host) checkHelper(add func(code, sev, fix, format string, args ...any)) {
	st, err := StatFile(h.Helper, false)
	switch {
	case err != nil:
		add(FindHelperUnsafe, SevError, "barn-net status", "cannot inspect qemu-bridge-helper %s: %v", h.Helper, err)
		return
	case !st.Exists:
		add(FindHelperMissing, SevError, "apt-get install qemu-system-common",
			"qemu-bridge-helper not found at %s", h.Helper)
		return
	case st.Symlink || st.Dir || st.UID != 0:
		add(FindHelperUnsafe, SevError, "apt-get install --reinstall qemu-system-common",
			"qemu-bridge-helper %s must be a regular root-owned file (symlink=%v dir=%v uid=%d)", h.Helper, st.Symlink, st.Dir, st.UID)
		return
	}
	m, _ := parseMode(st.Mode)
	if m&0o4000 == 0 {
		sev := SevError
		if h.UID == 0 {
			sev = SevWarning // root runs the helper with privileges anyway
		}
		add(FindHelperNotSetuid, sev, "barn-net install",
			"qemu-bridge-helper %s is mode %s, not setuid root: QEMU fails with \"failed to create tun device: Operation not permitted\"", h.Helper, st.Mode)
	}
}

// checkACL reads bridge.conf and its includes as qemu-bridge-helper will
// (loadACL), for the user h.UID: an error finding for exactly what makes
// the helper refuse (a missing or unreadable bridge.conf, a line it
// rejects) or deny the bridge; a warning for what it silently ignores.
func (h *Host) checkACL(bridge string, add func(code, sev, fix, format string, args ...any)) {
	path := h.BridgeConf()
	cwd, _ := os.Getwd()
	acl, notes, err := loadACL(path, bridge, cwd, h.readAs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		add(FindBridgeConfMissing, SevError, "barn-net install",
			"%s does not exist: the helper fails with \"failed to parse default acl file\"", path)
		return
	case errors.Is(err, fs.ErrPermission):
		add(FindBridgeConfBad, SevError, "barn-net install",
			"%s (or a directory above it) is not readable by uid %d: the setuid helper reads it after dropping root's file access and fails with \"failed to parse default acl file\"", path, h.UID)
		return
	case err != nil:
		add(FindBridgeConfBad, SevError, "barn-net status", "%s cannot be read: %v", path, err)
		return
	}
	for _, n := range notes {
		add(FindBridgeConfIgnored, SevWarning, "sudoedit "+path, "%s", n)
	}
	switch {
	case acl.Problem != "":
		add(FindBridgeConfInvalid, SevError, "sudoedit "+path,
			"%s %s: the helper refuses the whole file (\"failed to parse default acl file\")", path, acl.Problem)
	case !acl.Allows(bridge):
		add(FindBridgeNotAllowed, SevError, "barn-net install",
			"%s does not allow bridge %s: the helper fails with \"access denied by acl file\"", path, bridge)
	}
}

// readAs reads path as the helper running as h.UID could: the calling
// user's own reads are exact; for another user (root judging a user) the
// permission bits of the file and of every directory above it are checked
// for that user and its groups first (POSIX ACLs are not consulted).
func (h *Host) readAs(path string) ([]byte, error) {
	if h.UID != os.Geteuid() && h.UID != 0 {
		if err := accessibleBy(path, h.UID); err != nil {
			return nil, err
		}
	}
	return os.ReadFile(path)
}

// accessibleBy checks search permission on every directory of path's real
// location and read permission on the file itself for uid.
func accessibleBy(path string, uid int) error {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return err
	}
	real, err = filepath.Abs(real)
	if err != nil {
		return err
	}
	groups := groupsOf(uid)
	for d := filepath.Dir(real); ; d = filepath.Dir(d) {
		if err := permits(d, uid, groups, 0o1); err != nil {
			return err
		}
		if d == "/" {
			break
		}
	}
	return permits(real, uid, groups, 0o4)
}

// groupsOf is the set of uid's group IDs (primary and supplementary, from
// the user database; empty when uid has no entry).
func groupsOf(uid int) map[uint32]bool {
	groups := map[uint32]bool{}
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		if ids, err := u.GroupIds(); err == nil {
			for _, g := range ids {
				if n, err := strconv.ParseUint(g, 10, 32); err == nil {
					groups[uint32(n)] = true
				}
			}
		}
	}
	return groups
}

// permits is nil when p's permission bits grant uid (in groups) every
// bit of bits (0o4 read, 0o2 write, 0o1 search), as the kernel's
// owner/group/other check does for a non-root caller; else fs.ErrPermission.
func permits(p string, uid int, groups map[uint32]bool, bits uint32) error {
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		return &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	shift := uint32(0) // other
	switch {
	case st.Uid == uint32(uid):
		shift = 6
	case groups[st.Gid]:
		shift = 3
	}
	if uint32(st.Mode)&(bits<<shift) != bits<<shift { // Mode is uint16 on macOS
		return &fs.PathError{Op: "open", Path: p, Err: fs.ErrPermission}
	}
	return nil
}

func checkBridge(links []LinkInfo, bridge string, sn Subnet, add func(code, sev, fix, format string, args ...any)) {
	var br *LinkInfo
	for i := range links {
		if links[i].Name == bridge {
			br = &links[i]
		}
	}
	if br == nil {
		add(FindBridgeAbsent, SevError, "barn-net install",
			"bridge %s does not exist: the helper fails with \"failed to get mtu of bridge\"", bridge)
		return
	}
	if br.Kind != "bridge" {
		add(FindBridgeNotBridge, SevError, "barn-net status", "%s exists but is a %s link, not a bridge", bridge, br.Kind)
		return
	}
	if !br.Up {
		add(FindBridgeDown, SevError, "barn-net install", "bridge %s is down", bridge)
	}
	want := sn.HostCIDR()
	has, other := false, ""
	for _, a := range br.Addrs {
		if a == want {
			has = true
		} else if other == "" {
			other = a
		}
	}
	switch {
	case has:
	case other != "":
		add(FindBridgeCIDRMismatch, SevError, "barn-net status",
			"bridge %s has %s, not %s: it was installed for another subnet", bridge, other, want)
	default:
		add(FindBridgeAddrMissing, SevError, "barn-net install", "bridge %s has no address %s", bridge, want)
	}
}
