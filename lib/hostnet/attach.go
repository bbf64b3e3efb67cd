package hostnet

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// AttachTimeout bounds the readiness proof (QEMU start, tap join, quit).
// It only delays the verdict on a hang: a working attach returns as soon as
// it is proven. 30 s was too short for a paused QEMU inside a TCG guest on
// a loaded machine (the live host-under-test suite saw the QMP greeting
// arrive after it), so the bound is generous.
const AttachTimeout = 2 * time.Minute

// ProveAttach is the readiness proof: it starts
//
//	qemu-system-x86_64 -S -nodefaults -display none -machine pc -accel tcg
//	  -netdev bridge,id=n0,br=<bridge>,helper=<helper> -device virtio-net-pci,netdev=n0
//	  -qmp unix:<tmp>/qmp.sock,server=on,wait=off
//
// as h.AttachUID/h.AttachGID (an unprivileged user when run as root), waits
// until a tap is enslaved to the bridge, quits QEMU through QMP and waits
// for the tap to leave. QEMU exiting early returns its stderr (the helper's
// own message, e.g. "access denied by acl file").
func ProveAttach(ctx context.Context, h *Host, p *Plan) error {
	ctx, cancel := context.WithTimeout(ctx, AttachTimeout)
	defer cancel()
	// /tmp, not $TMPDIR: the unprivileged QEMU must be able to reach the
	// directory, and $TMPDIR may sit below a root-only path.
	dir, err := os.MkdirTemp("/tmp", "barn-net-attach-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if os.Geteuid() == 0 {
		if err := os.Chown(dir, h.AttachUID, h.AttachGID); err != nil {
			return err
		}
	}
	sock := filepath.Join(dir, "qmp.sock")
	before, err := h.Link.Links()
	if err != nil {
		return err
	}
	cmd := exec.Command(h.QEMU, "-S", "-nodefaults", "-display", "none", "-machine", "pc", "-accel", "tcg",
		"-netdev", fmt.Sprintf("bridge,id=n0,br=%s,helper=%s", p.Bridge, h.Helper),
		"-device", "virtio-net-pci,netdev=n0", "-qmp", "unix:"+sock+",server=on,wait=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Dir = dir
	if os.Geteuid() == 0 && h.AttachUID != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(h.AttachUID), Gid: uint32(h.AttachGID), Groups: []uint32{}}}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", h.QEMU, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill() // our own child, never a PID read from a file
			<-exited
		}
	}()
	tap := ""
	for tap == "" {
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("QEMU (uid %d) exited before attaching to %s: %v: %s", h.AttachUID, p.Bridge, err, strings.TrimSpace(stderr.String()))
		case <-ctx.Done():
			return fmt.Errorf("no tap joined %s within %s: %s", p.Bridge, AttachTimeout, strings.TrimSpace(stderr.String()))
		case <-time.After(100 * time.Millisecond):
		}
		links, err := h.Link.Links()
		if err != nil {
			return err
		}
		for _, l := range links {
			if l.Master == p.Bridge && !hasLink(before, l.Name) {
				tap = l.Name
			}
		}
	}
	if err := qmpQuit(ctx, sock); err != nil {
		return fmt.Errorf("tap %s joined %s, but quitting QEMU over QMP failed: %w", tap, p.Bridge, err)
	}
	select {
	case err := <-exited:
		exited <- err
	case <-ctx.Done():
		return fmt.Errorf("QEMU did not exit after quit")
	}
	for i := 0; i < 50; i++ {
		links, err := h.Link.Links()
		if err != nil {
			return err
		}
		if !hasLink(links, tap) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("tap %s stayed on %s after QEMU quit", tap, p.Bridge)
}

func hasLink(links []LinkInfo, name string) bool {
	for _, l := range links {
		if l.Name == name {
			return true
		}
	}
	return false
}

// qmpQuit connects to a QMP socket, negotiates capabilities and sends quit.
func qmpQuit(ctx context.Context, sock string) error {
	var conn net.Conn
	var err error
	for i := 0; i < 100; i++ {
		var d net.Dialer
		if conn, err = d.DialContext(ctx, "unix", sock); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	r := bufio.NewReader(conn)
	if _, err := r.ReadBytes('\n'); err != nil { // greeting
		return err
	}
	for _, cmd := range []string{"qmp_capabilities", "quit"} {
		if _, err := fmt.Fprintf(conn, `{"execute":%q}`+"\n", cmd); err != nil {
			return err
		}
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				if cmd == "quit" {
					return nil // QEMU closed the socket while quitting
				}
				return err
			}
			var msg map[string]json.RawMessage
			if json.Unmarshal(line, &msg) != nil {
				continue
			}
			if e, ok := msg["error"]; ok {
				return fmt.Errorf("QMP %s: %s", cmd, e)
			}
			if _, ok := msg["return"]; ok {
				break
			}
		}
	}
	return nil
}
