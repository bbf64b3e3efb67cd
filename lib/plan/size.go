package plan

import (
	"strconv"
	"strings"
)

// Binary size units, largest first.
var sizeUnits = []struct {
	name  string
	bytes int64
}{
	{"TiB", 1 << 40},
	{"GiB", 1 << 30},
	{"MiB", 1 << 20},
	{"KiB", 1 << 10},
}

// FormatSize renders a byte count for humans in the largest binary unit
// (TiB, GiB, MiB, KiB) in which it is at least 1 and exact to two decimals,
// dropping trailing zeros: 4 GiB, 4.5 GiB, 128 GiB, 1 TiB (from 1024 GiB),
// 1.5 TiB, 4100 MiB. A value that no unit renders exactly is printed in
// bytes ("1000 B"), so two different sizes never print alike.
func FormatSize(bytes int64) string {
	if bytes < 0 {
		return "-" + FormatSize(-bytes)
	}
	for _, u := range sizeUnits {
		if bytes < u.bytes || (bytes*100)%u.bytes != 0 {
			continue
		}
		whole, frac := bytes/u.bytes, (bytes%u.bytes)*100/u.bytes
		s := strconv.FormatInt(whole, 10)
		if frac != 0 {
			f := strings.TrimRight(strconv.FormatInt(100+frac, 10)[1:], "0")
			s += "." + f
		}
		return s + " " + u.name
	}
	return strconv.FormatInt(bytes, 10) + " B"
}
