//go:build !linux

package procid

import (
	"fmt"
	"runtime"
)

// SocketClients needs sock_diag(7) and /proc, which only Linux has; on
// other hosts it fails rather than report "no client".
func SocketClients(path string) ([]int, error) {
	return nil, fmt.Errorf("listing the clients of %s: not supported on %s", path, runtime.GOOS)
}
