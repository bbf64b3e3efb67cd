package inventory

import (
	"fmt"
	"strconv"
	"strings"
)

// maxRangeHosts bounds one host pattern's expansion.
const maxRangeHosts = 4096

// expandHostPattern expands Ansible host-name ranges exactly as Ansible's
// expand_hostname_range does: "10.10.10.[11:13]" → 11, 12, 13; an optional
// step "[1:9:2]"; leading zeros keep their width ("[01:03]"); alphabetic
// ranges "[a:c]". Ranges expand only in host names, never inside values.
func expandHostPattern(pattern string) ([]string, error) {
	open := strings.IndexByte(pattern, '[')
	if open < 0 {
		return []string{pattern}, nil
	}
	closeRel := strings.IndexByte(pattern[open:], ']')
	if closeRel < 0 {
		return []string{pattern}, nil // no range: Ansible keeps it literally
	}
	head, body, tail := pattern[:open], pattern[open+1:open+closeRel], pattern[open+closeRel+1:]
	if !strings.Contains(body, ":") {
		return []string{pattern}, nil
	}
	parts := strings.Split(body, ":")
	if len(parts) > 3 {
		return nil, fmt.Errorf("host range [%s] has too many ':'", body)
	}
	beg, end := parts[0], parts[1]
	step := 1
	if len(parts) == 3 && parts[2] != "" {
		s, err := strconv.Atoi(parts[2])
		if err != nil || s < 1 {
			return nil, fmt.Errorf("host range [%s] has an invalid step", body)
		}
		step = s
	}
	if beg == "" {
		beg = "0"
	}
	if end == "" {
		return nil, fmt.Errorf("host range [%s] has no end", body)
	}
	var items []string
	if isDigits(beg) && isDigits(end) {
		b, _ := strconv.Atoi(beg)
		e, err := strconv.Atoi(end)
		if err != nil || e < b || (e-b)/step > maxRangeHosts {
			return nil, fmt.Errorf("host range [%s] is empty or too large", body)
		}
		width := 0
		if strings.HasPrefix(beg, "0") && len(beg) > 1 {
			if len(beg) != len(end) {
				return nil, fmt.Errorf("host range [%s]: the ends must have the same width when zero-padded", body)
			}
			width = len(beg)
		}
		for i := b; i <= e; i += step {
			items = append(items, fmt.Sprintf("%0*d", width, i))
		}
	} else if len(beg) == 1 && len(end) == 1 && isLower(beg[0]) == isLower(end[0]) && isLetter(beg[0]) && isLetter(end[0]) {
		if end[0] < beg[0] {
			return nil, fmt.Errorf("host range [%s] is empty", body)
		}
		for c := int(beg[0]); c <= int(end[0]); c += step {
			items = append(items, string(rune(c)))
		}
	} else {
		return nil, fmt.Errorf("host range [%s] mixes letters and digits", body)
	}
	var out []string
	for _, it := range items {
		rest, err := expandHostPattern(tail)
		if err != nil {
			return nil, err
		}
		for _, r := range rest {
			out = append(out, head+it+r)
			if len(out) > maxRangeHosts {
				return nil, fmt.Errorf("host pattern %s expands to more than %d hosts", pattern, maxRangeHosts)
			}
		}
	}
	return out, nil
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func isLetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
func isLower(c byte) bool  { return c >= 'a' && c <= 'z' }
