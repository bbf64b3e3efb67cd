package fakeqemu

import (
	"fmt"
	"io"
	"net"
	"strings"
)

// HostFwdEnv names the relay target of the management port forward: with
// FAKEQEMU_HOSTFWD=HOST:PORT the fake listens on the -netdev user
// hostfwd=tcp:ADDR-:22 address, as QEMU's slirp does, and relays each
// connection to HOST:PORT (a test's sshd standing in for the guest's).
// Unset, the forward is not served: the scripts that never reach a guest
// keep their ports free.
const HostFwdEnv = "FAKEQEMU_HOSTFWD"

// hostfwdAddr is the host side of a user netdev's hostfwd=tcp:ADDR-:22
// option ("127.0.0.1:2222"), or "".
func hostfwdAddr(opts []string) string {
	for _, o := range opts {
		if r, ok := strings.CutPrefix(o, "hostfwd=tcp:"); ok {
			host, _, _ := strings.Cut(r, "-")
			return host
		}
	}
	return ""
}

// serveHostFwd listens on c.hostfwd and relays every connection to
// c.fwdTarget until the listener is closed. It fails as QEMU does when
// the address is taken.
func (v *vm) serveHostFwd() error {
	ln, err := net.Listen("tcp", v.cfg.hostfwd)
	if err != nil {
		return fmt.Errorf("Could not set up host forwarding rule 'tcp:%s-:22'", v.cfg.hostfwd)
	}
	v.tcp = ln
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go relay(c, v.cfg.fwdTarget)
		}
	}()
	return nil
}

// relay copies c to and from a new connection to target, both ways, and
// closes both when either side ends.
func relay(c net.Conn, target string) {
	defer c.Close()
	t, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer t.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(t, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, t); done <- struct{}{} }()
	<-done
}
