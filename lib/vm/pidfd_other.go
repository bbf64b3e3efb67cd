//go:build !linux

package vm

import "golang.org/x/sys/unix"

// pidfdOpen fails with ENOSYS where there are no pidfds (macOS): the
// caller falls back to kill(2) right after re-checking the identity.
func pidfdOpen(int) (int, error) { return -1, unix.ENOSYS }

// pidfdSignal is never reached without a pidfd.
func pidfdSignal(int, unix.Signal) error { return unix.ENOSYS }
