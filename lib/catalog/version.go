package catalog

import "strings"

// CompareVersions orders two version keys numerically on dot-separated
// components: numeric components compare as numbers ("9.10" > "9.9"),
// other components compare as strings and sort below numbers, and a missing
// component counts as 0 (so "9.7" and "9.7.0" compare equal; Validate
// refuses such a pair as ambiguous). It returns -1, 0 or +1.
func CompareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) || i < len(bs); i++ {
		x, y := "0", "0"
		if i < len(as) {
			x = as[i]
		}
		if i < len(bs) {
			y = bs[i]
		}
		if c := compareComponent(x, y); c != 0 {
			return c
		}
	}
	return 0
}

func compareComponent(x, y string) int {
	xn, yn := isDigits(x), isDigits(y)
	switch {
	case xn && yn:
		x, y = strings.TrimLeft(x, "0"), strings.TrimLeft(y, "0")
		if len(x) != len(y) {
			if len(x) < len(y) {
				return -1
			}
			return 1
		}
		return strings.Compare(x, y)
	case xn:
		return 1
	case yn:
		return -1
	}
	return strings.Compare(x, y)
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// MatchesPrefix reports whether version v is selected by prefix p on a
// dot-component boundary: v == p or v starts with p + ".". So "9" matches
// "9.10" but never "90.1", and "9.1" does not match "9.10".
func MatchesPrefix(v, p string) bool {
	return v == p || strings.HasPrefix(v, p+".")
}
