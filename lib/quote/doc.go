// Package quote writes values into the syntaxes of the programs Barn hands
// text to. There is one function per target syntax, used everywhere that
// syntax is written, and each refuses (with a usage error naming the
// value, reason "unrepresentable_value") what its syntax cannot carry
// instead of writing something the reader would take differently:
//
//	Shell, ShellIfNeeded   POSIX sh words (setup.env, remote commands, the
//	                       words of Ansible's ansible_ssh_common_args, hints)
//	SSHWord, SSHPath,      ssh_config(5) arguments, also `ssh -o Key=Value`
//	SSHInclude             (OpenSSH misc.c argv_split, %-tokens, ${ENV}, glob)
//	YAML, YAMLNode         double-quoted YAML scalars (cloud-init meta-data,
//	                       the Ansible connection export)
//	QEMUOpt                a value inside a QEMU key=value option string
//	HostsLine              one hosts(5) line (host and guest /etc/hosts)
//
// Every function is tested against its real reader (sh, ssh -G, PyYAML,
// qemu-system-x86_64, glibc's getent) in this package's tests and in the
// suites of the files that use it.
package quote

import "barn.dev/lib/exitcode"

// ReasonUnrepresentable is the reason of every refusal.
const ReasonUnrepresentable = "unrepresentable_value"

func refuse(syntax, value, why string) error {
	return exitcode.New(exitcode.Usage, "%q cannot be written as %s: %s", value, syntax, why).
		WithReason(ReasonUnrepresentable)
}
