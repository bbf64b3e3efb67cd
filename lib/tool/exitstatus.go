package tool

import "fmt"

// ExitStatusError ends a command with exactly Code and prints nothing: the
// command already said what it had to (e.g. barn-node exec passing a remote
// command's status through unchanged, 255 included).
type ExitStatusError struct{ Code int }

func (e *ExitStatusError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// ExitStatus returns nil for 0 and an *ExitStatusError otherwise.
func ExitStatus(code int) error {
	if code == 0 {
		return nil
	}
	return &ExitStatusError{Code: code}
}
