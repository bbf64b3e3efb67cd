package quote

import (
	"net/netip"
	"strings"

	"barn.dev/lib/lazyre"
)

// hostNameRE is a name hosts(5) and the resolver take: RFC 1123 labels of
// letters, digits and inner hyphens, joined by dots. It keeps whitespace
// (the field separator), '#' (a comment) and line breaks out.
var hostNameRE = lazyre.New(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)

// HostName reports whether name can be a field of a hosts(5) line: an RFC
// 1123 host name of at most 253 characters.
func HostName(name string) error {
	if len(name) > 253 || !hostNameRE.MatchString(name) {
		return refuse("a hosts(5) name", name, "not a host name (RFC 1123 labels joined by dots)")
	}
	return nil
}

// HostsLine returns one hosts(5) line without its newline: the IPv4
// address, a tab, then the names (canonical name first, then aliases)
// separated by spaces. hosts(5) has no quoting: fields are separated by
// blanks and '#' starts a comment, so a name that is not a host name (see
// HostName) and an address that is not a dotted-quad IPv4 address are
// refused, as is an empty name list.
func HostsLine(address string, names []string) (string, error) {
	if a, err := netip.ParseAddr(address); err != nil || !a.Is4() {
		return "", refuse("a hosts(5) address", address, "not an IPv4 address")
	}
	if len(names) == 0 {
		return "", refuse("a hosts(5) line", address, "an address needs at least one name")
	}
	for _, n := range names {
		if err := HostName(n); err != nil {
			return "", err
		}
	}
	return address + "\t" + strings.Join(names, " "), nil
}
