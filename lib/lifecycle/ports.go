package lifecycle

import (
	"net"
	"strconv"
	"sync"

	"barn.dev/lib/exitcode"
)

// MaxPort bounds the management SSH port search (2222..MaxPort).
const MaxPort = 65000

func (m *Manager) portBase() int {
	if m.PortBase > 0 {
		return m.PortBase
	}
	return 2222
}

// bindFree reports whether 127.0.0.1:port can be bound right now.
func bindFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

func (m *Manager) portFree(port int) bool {
	if m.PortFree != nil {
		return m.PortFree(port)
	}
	return bindFree(port)
}

// portAllocator hands out management SSH ports from the base upward by
// binding, skipping every port recorded in node state or already handed
// out. It must be used under the deployment lock, so two commands never
// share a port; the caller records each port before launch.
type portAllocator struct {
	mu    sync.Mutex
	m     *Manager
	taken map[int]bool
}

func (m *Manager) newPortAllocator() (*portAllocator, error) {
	a := &portAllocator{m: m, taken: map[int]bool{}}
	names, err := m.Root.NodeNames()
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		n, err := m.Root.ReadNode(name)
		if err != nil {
			return nil, err
		}
		if n != nil && n.SSHPort > 0 {
			a.taken[n.SSHPort] = true
		}
	}
	return a, nil
}

// next returns the lowest free port not yet taken and marks it taken;
// resource error (6) when none is free up to MaxPort.
func (a *portAllocator) next() (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for p := a.m.portBase(); p <= MaxPort; p++ {
		if a.taken[p] {
			continue
		}
		if a.m.portFree(p) {
			a.taken[p] = true
			return p, nil
		}
	}
	return 0, exitcode.New(exitcode.Resource, "no free management SSH port on 127.0.0.1 between %d and %d", a.m.portBase(), MaxPort).
		WithReason("no_free_port")
}
