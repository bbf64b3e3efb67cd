package vm

import "golang.org/x/sys/unix"

// pidfdOpen pins pid with a pidfd (Linux 5.3+), so a signal sent through
// it can never reach a process that reused the number.
func pidfdOpen(pid int) (int, error) { return unix.PidfdOpen(pid, 0) }

// pidfdSignal sends sig through the pidfd fd.
func pidfdSignal(fd int, sig unix.Signal) error { return unix.PidfdSendSignal(fd, sig, nil, 0) }
