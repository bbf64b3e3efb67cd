package quote

import "strings"

// Shell returns s as exactly one POSIX shell word, always single-quoted.
// Inside single quotes every character is literal (POSIX.1-2017 XCU 2.2.2),
// so only the single quote itself needs care: the quoting is closed, the
// quote written as \' and the quoting reopened. Any string without NUL
// (which no shell word holds), empty and multi-line included, is
// representable. Python's shlex.split (Ansible's reader of ssh arguments)
// reads it the same way.
func Shell(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ShellIfNeeded returns s bare when it is a non-empty word of only
// [A-Za-z0-9@%+=:,./_-] (the set Python's shlex.quote leaves bare: no
// character there is special to sh, bash, zsh or fish), else Shell(s). For
// text a person reads and pastes (next: hints, completion scripts).
func ShellIfNeeded(s string) string {
	if s == "" {
		return Shell(s)
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_-", r)) {
			return Shell(s)
		}
	}
	return s
}
