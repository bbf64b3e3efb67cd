package vm

// SetAfterPidfileCheck sets the hook run between the check of a stale
// pidfile and its removal (nil: none).
func SetAfterPidfileCheck(f func(path string)) { afterPidfileCheck = f }
