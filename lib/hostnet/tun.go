package hostnet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"
)

// TunPath is the TUN/TAP clone device (h.Tun, default /dev/net/tun).
func (h *Host) TunPath() string { return or(h.Tun, "/dev/net/tun") }

// TunFix is the one command that makes the TUN device usable by every
// user, as udev's default rule (KERNEL=="tun", MODE="0666") does.
func (h *Host) TunFix() string { return "chmod 0666 " + h.TunPath() }

// tunDenied says why uid, with primary group gid and supplementary groups,
// cannot open the TUN device for reading and writing, as
// qemu-bridge-helper does after dropping to QEMU's user; "" when it can.
// The kernel decides (permission bits, groups, POSIX ACLs, a nodev
// mount): the device is opened read-write and closed at once (no
// interface is made) by this process for its own user, else, as root, by
// a child running as that user. Root always can; another user, judged by
// a process that is not root, is not decided here ("": QEMU will say).
// Without udev (a container, a minimal VM) the device stays root's 0600.
func (h *Host) tunDenied(uid, gid int, groups []uint32) string {
	path := h.TunPath()
	why := ""
	switch {
	case uid == 0:
	case uid == os.Geteuid():
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err == nil {
			f.Close()
		} else if errors.Is(err, fs.ErrPermission) {
			why = err.Error()
		}
	case os.Geteuid() == 0:
		cmd := exec.Command("/bin/sh", "-c", `: <>"$1"`, "sh", path)
		cmd.Env = []string{"LC_ALL=C", "PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groups}}
		if out, err := cmd.CombinedOutput(); err != nil && strings.Contains(string(out), "Permission denied") {
			why = strings.TrimSpace(string(out))
		}
	}
	if why == "" {
		return ""
	}
	st, _ := StatFile(path, false)
	return fmt.Sprintf("uid %d cannot open %s (mode %s, owner %d:%d) for reading and writing (%s), so the bridge helper fails with \"failed to open /dev/net/tun: Permission denied\"", uid, path, st.Mode, st.UID, st.GID, why)
}

// checkTun adds the TUN device's findings for the user h.UID, judged with
// that user's own groups (QEMU runs in the user's session).
func (h *Host) checkTun(add func(code, sev, fix, format string, args ...any)) {
	if _, err := os.Stat(h.TunPath()); err != nil {
		add(FindTunMissing, SevError, "modprobe tun", "%s is not available: %v", h.TunPath(), err)
		return
	}
	gid, groups := -1, []uint32{}
	if u, err := user.LookupId(strconv.Itoa(h.UID)); err == nil {
		gid, _ = strconv.Atoi(u.Gid)
		for g := range groupsOf(h.UID) {
			groups = append(groups, g)
		}
	}
	if gid < 0 && h.UID != os.Geteuid() {
		return // no such user to run as: not decided here
	}
	if why := h.tunDenied(h.UID, gid, groups); why != "" {
		add(FindTunDenied, SevError, h.TunFix(), "%s", why)
	}
}
