package spec

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestHostnameLimitIsTheKernels: in a private UTS namespace, the kernel
// takes a hostname of MaxHostnameBytes and refuses one byte more.
func TestHostnameLimitIsTheKernels(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a UTS namespace")
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // the thread ends with the namespace: never unlocked
		if err := unix.Unshare(unix.CLONE_NEWUTS); err != nil {
			errc <- err
			return
		}
		if err := unix.Sethostname([]byte(strings.Repeat("h", MaxHostnameBytes))); err != nil {
			errc <- fmt.Errorf("%d bytes refused: %v", MaxHostnameBytes, err)
			return
		}
		if err := unix.Sethostname([]byte(strings.Repeat("h", MaxHostnameBytes+1))); err != unix.EINVAL {
			errc <- fmt.Errorf("%d bytes: %v, want EINVAL", MaxHostnameBytes+1, err)
			return
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}
