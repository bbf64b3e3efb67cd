package catalog

import (
	"fmt"
	"net/netip"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/net/idna"
)

// A repository URL's canonical form is what every trust record, high-water
// mark and official-repository check is keyed by, so that no other spelling
// of the same server and path can start a fresh record. Two URLs that Go's
// HTTP client sends to the same host, port and path have the same canonical
// form; a URL whose host could reach different servers depending on the
// resolver, or that looks like another host, is refused.
//
//	scheme      lower-cased
//	host        DNS names: lower-cased, mapped by IDNA (UTS #46 lookup
//	            mapping, as net/http's dialer does: full-width letters and
//	            digits, ideographic full stops, case) and written as ASCII
//	            (punycode "xn--" labels); one trailing dot (the root label)
//	            removed; every label 1–63 letters, digits, hyphens or
//	            underscores, and a label mixing scripts (Latin with
//	            Cyrillic, ...) refused. IPv4: dotted quad only (a last label
//	            that is a number must be one; octal, hex, short and integer
//	            forms are refused since resolvers disagree on them). IPv6:
//	            bracketed, compressed lower-case; an IPv4-mapped address is
//	            the IPv4 address it dials; a zone ("%eth0", "%2") is
//	            refused, since an interface's name and index are two
//	            spellings of one link.
//	port        numeric 1–65535 without leading zeros; empty ("host:")
//	            and the scheme's default port are dropped
//	path        cleaned ("//", ".", ".." resolved; percent-escapes decoded),
//	            no trailing slash
//
// A URL with credentials, a query or a fragment is no repository root.

// hostProfile is the strict IDNA profile for repository hosts: the lookup
// mapping (what net/http applies before dialing), the Bidi rule, RFC 1034
// characters and DNS length limits, non-transitional (ß stays ß).
var hostProfile = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.VerifyDNSLength(true), idna.Transitional(false))

// mappingProfile is hostProfile without the length checks, used once to map
// a Unicode host before its trailing root dot is removed (the mapping can
// produce that dot from U+3002 and its relatives).
var mappingProfile = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.Transitional(false))

// canonicalURL returns the canonical root of an http(s) repository URL
// (see above), or an error saying what is wrong with it.
func canonicalURL(loc string) (*url.URL, error) {
	u, err := url.Parse(loc)
	if err != nil {
		return nil, err
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(loc, "#") {
		return nil, fmt.Errorf("a repository URL has a host and no credentials, query or fragment")
	}
	scheme := strings.ToLower(u.Scheme)
	host, err := canonicalHost(u.Hostname(), strings.HasPrefix(u.Host, "["))
	if err != nil {
		return nil, err
	}
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("port %q is not a TCP port (1-65535)", p)
		}
		if (scheme == "https" && n != 443) || (scheme == "http" && n != 80) {
			host += ":" + strconv.FormatUint(n, 10)
		}
	}
	return &url.URL{Scheme: scheme, Host: host, Path: strings.TrimRight(path.Clean("/"+u.Path), "/")}, nil
}

// canonicalHost returns host (without port; bracketed says it was an IPv6
// literal in brackets) in canonical form, with brackets for IPv6.
func canonicalHost(host string, bracketed bool) (string, error) {
	if bracketed {
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() {
			return "", fmt.Errorf("%q in brackets is not an IPv6 address", host)
		}
		if a.Zone() != "" {
			return "", fmt.Errorf("%q has a zone (%%%s): one interface has several zone spellings (name, index), so a zoned address has no canonical form; serve the repository on a global or loopback address", host, a.Zone())
		}
		if a.Is4In6() {
			return a.Unmap().String(), nil
		}
		return "[" + a.String() + "]", nil
	}
	mapped := strings.ToLower(host)
	if !isASCII(mapped) {
		var err error
		if mapped, err = mappingProfile.ToASCII(host); err != nil {
			return "", fmt.Errorf("host %q is not a valid internationalised domain name (%v)", host, err)
		}
	}
	name := strings.TrimSuffix(mapped, ".")
	labels := strings.Split(name, ".")
	if last := labels[len(labels)-1]; looksNumeric(last) {
		if a, err := netip.ParseAddr(name); err != nil || !a.Is4() || a.String() != name {
			return "", fmt.Errorf("host %q ends in a number but is not a dotted-quad IPv4 address (octal, hex, short and integer forms reach different hosts with different resolvers)", host)
		}
		return name, nil
	}
	if len(name) > 253 {
		return "", fmt.Errorf("host %q is longer than 253 characters", host)
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || strings.Trim(l, "abcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			return "", fmt.Errorf("host %q: label %q is not 1-63 letters, digits, hyphens or underscores", host, l)
		}
		if !strings.HasPrefix(l, "xn--") {
			continue
		}
		u, err := hostProfile.ToUnicode(l)
		if back, err2 := hostProfile.ToASCII(u); err != nil || err2 != nil || back != l {
			return "", fmt.Errorf("host %q: label %q is not a valid internationalised label", host, l)
		}
		if scripts := labelScripts(u); !allowedScriptMix(scripts) {
			return "", fmt.Errorf("host %q: label %q mixes scripts (%s), a look-alike trick; spell each label in one script", host, u, strings.Join(scripts, ", "))
		}
	}
	return name, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// looksNumeric reports whether a last host label makes the host an IPv4
// address for URL parsers (WHATWG's "ends in a number"): decimal digits,
// or 0x followed by hex digits.
func looksNumeric(label string) bool {
	if h, ok := strings.CutPrefix(label, "0x"); ok {
		return strings.Trim(h, "0123456789abcdef") == ""
	}
	return label != "" && strings.Trim(label, "0123456789") == ""
}

// labelScripts lists the scripts of a label's letters, sorted, ignoring
// Common and Inherited (digits, hyphens, combining marks).
func labelScripts(label string) []string {
	seen := map[string]bool{}
	for _, r := range label {
		for name, table := range unicode.Scripts {
			if name != "Common" && name != "Inherited" && unicode.Is(table, r) {
				seen[name] = true
				break
			}
		}
	}
	out := make([]string, 0, len(seen))
	for name := range seen {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// allowedScriptMix is Unicode's "highly restrictive" level (UTS #39 §5.2):
// one script, or Latin with Han and the Japanese, Chinese or Korean scripts
// that are written together with it.
func allowedScriptMix(scripts []string) bool {
	if len(scripts) <= 1 {
		return true
	}
	for _, set := range [][]string{{"Han", "Hiragana", "Katakana", "Latin"}, {"Bopomofo", "Han", "Latin"}, {"Han", "Hangul", "Latin"}} {
		if !slices.ContainsFunc(scripts, func(s string) bool { return !slices.Contains(set, s) }) {
			return true
		}
	}
	return false
}
