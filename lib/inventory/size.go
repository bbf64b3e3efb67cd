package inventory

import (
	"fmt"
	"strconv"
	"strings"

	"barn.dev/lib/lazyre"
)

var sizeUnits = map[string]int64{
	"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
	"KB": 1000, "MB": 1000 * 1000, "GB": 1000 * 1000 * 1000, "TB": 1000 * 1000 * 1000 * 1000,
}

var (
	reSize      = lazyre.New(`^([1-9][0-9]*)(B|KiB|MiB|GiB|TiB|KB|MB|GB|TB)$`)
	reSizeLoose = lazyre.New(`^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$`)
)

// ParseSize parses a size string: a positive integer and one
// case-sensitive unit of B KiB MiB GiB TiB KB MB GB TB. It returns bytes,
// or an error and a hint naming the unambiguous spelling ("8G" → "write
// 8GiB").
func ParseSize(s string) (bytes int64, hint string, err error) {
	if m := reSize.FindStringSubmatch(s); m != nil {
		n, perr := strconv.ParseInt(m[1], 10, 64)
		u := sizeUnits[m[2]]
		if perr != nil || n > (1<<62)/u {
			return 0, "", fmt.Errorf("size is too large")
		}
		return n * u, "", nil
	}
	m := reSizeLoose.FindStringSubmatch(s)
	if m == nil {
		return 0, "write a whole number and a unit, e.g. 8GiB", fmt.Errorf("invalid size")
	}
	num, unit := m[1], m[2]
	canon := canonicalUnit(unit)
	switch {
	case strings.Contains(num, "."):
		f, _ := strconv.ParseFloat(num, 64)
		if u, ok := sizeUnits[canon]; ok {
			b := int64(f * float64(u))
			if b > 0 && b%(1<<20) == 0 {
				return 0, fmt.Sprintf("write %dMiB", b>>20), fmt.Errorf("invalid size: fractions are not allowed")
			}
		}
		return 0, "write a whole number and a unit, e.g. 1536MiB", fmt.Errorf("invalid size: fractions are not allowed")
	case strings.TrimLeft(num, "0") == "":
		return 0, "", fmt.Errorf("a size must be positive")
	case unit == "":
		return 0, fmt.Sprintf("write %s without quotes or with a unit, e.g. %sMiB", strings.TrimLeft(num, "0"), strings.TrimLeft(num, "0")), fmt.Errorf("invalid size: a quoted number has no unit")
	case canon != "":
		return 0, fmt.Sprintf("write %s%s", strings.TrimLeft(num, "0"), canon), fmt.Errorf("invalid size")
	}
	return 0, "units are B, KiB, MiB, GiB, TiB, KB, MB, GB, TB; e.g. 8GiB", fmt.Errorf("invalid size: unknown unit %q", unit)
}

// canonicalUnit maps loose unit spellings (G, g, gib, Gi, gb) to the unit
// the user most likely meant; "" when unknown.
func canonicalUnit(u string) string {
	switch strings.ToLower(u) {
	case "b":
		return "B"
	case "k", "ki", "kib":
		return "KiB"
	case "m", "mi", "mib":
		return "MiB"
	case "g", "gi", "gib":
		return "GiB"
	case "t", "ti", "tib":
		return "TiB"
	case "kb":
		return "KB"
	case "mb":
		return "MB"
	case "gb":
		return "GB"
	case "tb":
		return "TB"
	}
	return ""
}
