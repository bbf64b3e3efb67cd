// Package testport hands tests a TCP port on 127.0.0.1 that the kernel
// chose as free, for a real process (QEMU's port forward, sshd) to take.
// A fixed port collides with whatever else holds it: `go test` runs
// packages in parallel, and barn-node's real-QEMU script held 2222 while
// lib/qemu's tests wanted it.
package testport

import (
	"net"
	"testing"
)

// Free returns a port the kernel just gave a listener on 127.0.0.1 and
// closed again. Another process may take it before the caller does (the
// window is short); a test that needs certainty retries on "address in
// use".
func Free(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
