// Package testexec writes the fake executables tests run (shell scripts
// standing in for nmcli, ssh, qemu-img, the bridge helper). Writing one
// while another goroutine forks lets the child inherit the open write
// descriptor until its exec, and an exec of the script meanwhile fails
// with "text file busy" (ETXTBSY; golang/go#22315): parallel tests that
// write and run scripts flake under load. WriteScript holds
// syscall.ForkLock, which every fork in the process takes for reading,
// while the file is open, so no child ever inherits it.
package testexec

import (
	"os"
	"syscall"
)

// WriteScript writes data to path with mode 0755 (created or truncated,
// then chmod 0755 so the umask does not apply), with no fork in the
// process while the file is open. Errors are os.WriteFile's and
// os.Chmod's.
func WriteScript(path string, data []byte) error {
	syscall.ForkLock.Lock()
	err := os.WriteFile(path, data, 0o755)
	syscall.ForkLock.Unlock()
	if err != nil {
		return err
	}
	return os.Chmod(path, 0o755)
}
