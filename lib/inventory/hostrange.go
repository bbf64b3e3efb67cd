package inventory

import (
	"barn.dev/lib/lazyre"
	"fmt"
	"math/big"
	"strings"
)

// maxRangeHosts bounds one host pattern's expansion.
const maxRangeHosts = 4096

// asciiLetters is Python's string.ascii_letters, the alphabet of
// Ansible's letter ranges.
const asciiLetters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

// Ansible's parse_address patterns (parsing/utils/addresses.py): a host
// with :PORT, bracketed or not, and the IPv4 and host-name forms (ranges
// allowed) that make the port count. IPv6 addresses are not recognised:
// Barn refuses every host that is not IPv4 anyway.
var (
	reBracketPort = lazyre.New(`^\[(.+)\]:([0-9]+)$`)
	reHostPort    = lazyre.New(`^((?:[^:\[\]]|\[[^\]]*\])*):([0-9]+)$`)
	ipv4Part      = `(?:[01]?[0-9]{1,2}|2[0-4][0-9]|25[0-5]|\[[0-9]+:[0-9]+(?::[0-9]+)?\])`
	reIPv4Pattern = lazyre.New(`^(?:` + ipv4Part + `\.){3}` + ipv4Part + `$`)
	labelRange    = `\[(?:[a-z]:[a-z]|[0-9]+:[0-9]+)(?::[0-9]+)?\]`
	reHostLabel   = lazyre.New(`(?i)^(?:[\p{L}\p{N}_]|` + labelRange + `)(?:[\p{L}\p{N}_-]|` + labelRange + `)*$`)
)

// expandHostPattern expands one host key exactly as Ansible's yaml
// inventory plugin does (_expand_hostpattern: parse_address, then
// expand_hostname_range of plugins/inventory/__init__.py), for every
// input: a :PORT suffix counts when what precedes it is an IPv4 address or
// host name (ranges allowed), and is returned as port; the first [ and the
// first ] split head, range and tail; the range is BEG:END or
// BEG:END:STEP; an empty BEG is 0, an empty END an error; a BEG with a
// leading zero pads every number to its width and needs an END as long;
// BEG and END that are both substrings of Python's ascii_letters make a
// letter range (a..z then A..Z), anything else goes through Python's int()
// (spaces, signs and underscores allowed); the STEP too, so an empty or
// zero STEP fails and a negative one, like END < BEG, expands to nothing;
// the tail is expanded again. The error states what Ansible does.
func expandHostPattern(key string) (names []string, port string, err error) {
	pattern, port := ansiblePort(key)
	if err := expandInto(pattern, &names); err != nil {
		return nil, "", err
	}
	return names, port, nil
}

// ansiblePort splits a :PORT suffix off key as parse_address does.
func ansiblePort(key string) (pattern, port string) {
	addr := key
	if m := reBracketPort.FindStringSubmatch(addr); m != nil {
		addr, port = m[1], m[2]
	}
	if m := reHostPort.FindStringSubmatch(addr); m != nil {
		addr, port = m[1], m[2]
	}
	if port == "" || !validHostPattern(addr) {
		return key, ""
	}
	return addr, port
}

func validHostPattern(addr string) bool {
	if reIPv4Pattern.MatchString(addr) {
		return true
	}
	for _, l := range strings.Split(addr, ".") {
		if !reHostLabel.MatchString(l) || strings.HasSuffix(l, "_") || strings.HasSuffix(l, "-") {
			return false
		}
	}
	return true
}

func expandInto(line string, out *[]string) error {
	if !strings.Contains(line, "[") {
		*out = append(*out, line)
		return nil
	}
	parts := strings.Split(strings.Replace(strings.Replace(line, "[", "|", 1), "]", "|", 1), "|")
	if len(parts) != 3 {
		return fmt.Errorf("Ansible fails on it: a host range needs one [ and a ] after it, and no |")
	}
	head, nrange, tail := parts[0], parts[1], parts[2]
	bounds := strings.Split(nrange, ":")
	if len(bounds) != 2 && len(bounds) != 3 {
		return fmt.Errorf("Ansible fails on it: host range must be begin:end or begin:end:step")
	}
	beg, end, step := bounds[0], bounds[1], "1"
	if len(bounds) == 3 {
		step = bounds[2]
	}
	if beg == "" {
		beg = "0"
	}
	if end == "" {
		return fmt.Errorf("Ansible fails on it: host range must specify end value")
	}
	width := 0
	if beg[0] == '0' && len(beg) > 1 {
		width = len(beg)
		if len(end) != width {
			return fmt.Errorf("Ansible fails on it: host range must specify equal-length begin and end formats")
		}
	}
	items, err := rangeItems(beg, end, step, width)
	if err != nil {
		return err
	}
	for _, it := range items {
		if err := expandInto(head+it+tail, out); err != nil {
			return err
		}
		if len(*out) > maxRangeHosts {
			return fmt.Errorf("expands to more than %d hosts", maxRangeHosts)
		}
	}
	return nil
}

// rangeItems is the sequence of one range: letters when both ends are in
// ascii_letters, else numbers (Python's range with int() of each part).
func rangeItems(beg, end, step string, width int) ([]string, error) {
	ib, iend := strings.Index(asciiLetters, beg), strings.Index(asciiLetters, end)
	if ib >= 0 && iend >= 0 {
		if ib > iend {
			return nil, fmt.Errorf("Ansible fails on it: host range must have begin <= end")
		}
		s, ok := pyInt(step)
		if ok && s.Sign() != 0 {
			var items []string
			if s.Sign() > 0 && s.IsInt64() {
				for i := int64(ib); i <= int64(iend); i += s.Int64() {
					items = append(items, asciiLetters[i:i+1])
				}
			}
			return items, nil // a negative step slices nothing
		}
		// Python's slice fails; Ansible then tries int() of the letters,
		// which fails as well.
	}
	b, okb := pyInt(beg)
	e, oke := pyInt(end)
	s, oks := pyInt(step)
	switch {
	case !okb || !oke || !oks:
		bad := beg
		if okb {
			bad = end
		}
		if okb && oke {
			bad = step
		}
		return nil, fmt.Errorf("Ansible fails on it: Python's int() cannot read %q", bad)
	case s.Sign() == 0:
		return nil, fmt.Errorf("Ansible fails on it: range() step must not be zero")
	}
	e.Add(e, big.NewInt(1))
	count := new(big.Int).Sub(e, b)
	if count.Sign()*s.Sign() <= 0 {
		return nil, nil
	}
	count.Add(count, new(big.Int).Sub(s, big.NewInt(int64(s.Sign()))))
	count.Quo(count, s)
	if count.Cmp(big.NewInt(maxRangeHosts)) > 0 {
		return nil, fmt.Errorf("expands to more than %d hosts", maxRangeHosts)
	}
	var items []string
	for i, x := int64(0), new(big.Int).Set(b); i < count.Int64(); i, x = i+1, new(big.Int).Add(x, s) {
		items = append(items, zfill(x.String(), width))
	}
	return items, nil
}

// zfill is Python's str.zfill: pad with zeros after any sign.
func zfill(s string, width int) string {
	if len(s) >= width {
		return s
	}
	sign := ""
	if s[0] == '-' || s[0] == '+' {
		sign, s = s[:1], s[1:]
	}
	return sign + strings.Repeat("0", width-len(sign)-len(s)) + s
}

// pyInt is Python's int(s) in base 10 for ASCII text: surrounding
// whitespace, one sign, digits with single underscores between them.
// Other digits Python accepts (Unicode ones) are refused: false.
func pyInt(s string) (*big.Int, bool) {
	s = strings.Trim(s, " \t\n\r\v\f")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg, s = s[0] == '-', s[1:]
	}
	if s == "" || s[0] == '_' || s[len(s)-1] == '_' || strings.Contains(s, "__") {
		return nil, false
	}
	digits := strings.ReplaceAll(s, "_", "")
	if !isDigits(digits) {
		return nil, false
	}
	n, _ := new(big.Int).SetString(digits, 10)
	if neg {
		n.Neg(n)
	}
	return n, true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
