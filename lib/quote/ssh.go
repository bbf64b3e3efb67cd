package quote

import (
	"strings"
)

// The ssh_config(5) syntax, as OpenSSH 9.x reads it (readconf.c
// process_config_line_depth, misc.c argv_split; `ssh -o Key=Value` is read
// as one such line):
//
//   - a line is split into arguments at spaces and tabs; a double- or
//     single-quoted part may hold them, and \\, \" and \' stand for the
//     character itself, inside quotes and out (any other backslash is
//     literal);
//   - an argument that starts with '#' begins a comment (a '#' inside an
//     argument is literal), and a line ends at a newline: there is no way
//     to write a newline, carriage return or NUL;
//   - extra arguments after the ones an option takes are an error
//     ("garbage at end of line"), so an unquoted space breaks the line;
//   - file-name options (IdentityFile, UserKnownHostsFile, ControlPath,
//     IdentityAgent, CertificateFile, ...) then expand %-tokens, where %%
//     is a literal '%', and ${NAME} from the environment, which has no
//     escape; a leading '~' is the home directory;
//   - Include then matches its argument as a glob(3) pattern (backslash
//     escapes a pattern character) and expands no tokens.

// SSHWord returns s as exactly one ssh_config argument (also the value of
// `ssh -o Key=Value`): bare when nothing in it is special, else
// double-quoted with \ and " escaped. It refuses the empty string and
// control characters other than tab (no argument can hold a line break).
func SSHWord(s string) (string, error) {
	if s == "" {
		return "", refuse("an ssh_config argument", s, "the empty string is a missing argument")
	}
	plain := true
	for _, r := range s {
		switch {
		case r < 0x20 && r != '\t', r == 0x7f:
			return "", refuse("an ssh_config argument", s, "ssh_config lines cannot hold control characters")
		case r >= 0x80:
			// bytes ≥0x80 are ordinary argument characters
		case !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._+-:@,", r)):
			plain = false
		}
	}
	if plain {
		return s, nil
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`, nil
}

// SSHPath returns an absolute file name as one argument of an option
// OpenSSH %-expands (IdentityFile, UserKnownHostsFile, ControlPath): '%'
// is doubled, then SSHWord. It refuses relative names (a leading '~' or a
// relative name would be resolved against the home directory) and "${",
// which OpenSSH always expands from the environment.
func SSHPath(path string) (string, error) {
	if !strings.HasPrefix(path, "/") {
		return "", refuse("an ssh_config file name", path, "not an absolute path")
	}
	if strings.Contains(path, "${") {
		return "", refuse("an ssh_config file name", path, `OpenSSH expands "${...}" from the environment and has no escape for it`)
	}
	return SSHWord(strings.ReplaceAll(path, "%", "%%"))
}

// SSHInclude returns an absolute file name as the argument of an Include
// line: glob(3) pattern characters (* ? [ ] \) are backslash-escaped so the
// pattern matches only that file, then SSHWord.
func SSHInclude(path string) (string, error) {
	if !strings.HasPrefix(path, "/") {
		return "", refuse("an ssh_config Include", path, "not an absolute path")
	}
	var b strings.Builder
	for _, r := range path {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return SSHWord(b.String())
}
