// Package human renders values for people: sizes in binary units,
// durations, and aligned tables. JSON documents never use it; only the
// --text views (the default on a terminal) do.
package human

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Binary size units, largest first.
var units = []struct {
	name  string
	bytes int64
}{
	{"TiB", 1 << 40},
	{"GiB", 1 << 30},
	{"MiB", 1 << 20},
	{"KiB", 1 << 10},
}

// ExactSize renders a byte count in the largest binary unit (TiB, GiB, MiB,
// KiB) in which it is at least 1 and exact to two decimals, dropping
// trailing zeros: 4 GiB, 4.5 GiB, 1.25 TiB, 4100 MiB. A value that no unit
// renders exactly is printed in bytes ("1000 B"), so two different sizes
// never print alike: use it where values are compared (drift lines).
func ExactSize(bytes int64) string {
	if bytes < 0 {
		return "-" + ExactSize(-bytes)
	}
	for _, u := range units {
		if bytes < u.bytes || (bytes*100)%u.bytes != 0 {
			continue
		}
		return decimal(bytes, u.bytes) + " " + u.name
	}
	return strconv.FormatInt(bytes, 10) + " B"
}

// Size renders a byte count for reading: exactly when ExactSize can in a
// unit of at least 1 (4 GiB, 4.5 GiB, 1.25 TiB), otherwise rounded to one
// decimal in the largest unit it reaches (625612288 bytes: "596.6 MiB",
// not "610949.5 KiB"). Below 1 KiB it is bytes ("512 B").
func Size(bytes int64) string {
	if bytes < 0 {
		return "-" + Size(-bytes)
	}
	for _, u := range units {
		if bytes < u.bytes {
			continue
		}
		if (bytes*100)%u.bytes == 0 {
			return decimal(bytes, u.bytes) + " " + u.name
		}
		s := strconv.FormatFloat(float64(bytes)/float64(u.bytes), 'f', 1, 64)
		return strings.TrimSuffix(s, ".0") + " " + u.name
	}
	return strconv.FormatInt(bytes, 10) + " B"
}

// decimal renders bytes/unit with up to two decimals, trailing zeros dropped.
func decimal(bytes, unit int64) string {
	whole, frac := bytes/unit, (bytes%unit)*100/unit
	s := strconv.FormatInt(whole, 10)
	if frac != 0 {
		s += "." + strings.TrimRight(strconv.FormatInt(100+frac, 10)[1:], "0")
	}
	return s
}

// Duration renders d for reading at a precision that matters to a person
// waiting: "0s", "45s", "3m 05s", "1h 02m", "2d 03h". Negative durations
// render as "0s".
func Duration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d.Round(time.Second) / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm %02ds", s/60, s%60)
	case s < 86400:
		return fmt.Sprintf("%dh %02dm", s/3600, (s%3600)/60)
	default:
		return fmt.Sprintf("%dd %02dh", s/86400, (s%86400)/3600)
	}
}

// Table returns a tabwriter for a text view: cells separated by '\t',
// columns padded with spaces to the widest cell plus two. Call Flush.
func Table(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// EditDistance is the Levenshtein distance between a and b, in runes: the
// measure of the "did you mean" hints.
func EditDistance(a, b string) int {
	x, y := []rune(a), []rune(b)
	prev := make([]int, len(y)+1)
	cur := make([]int, len(y)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(x); i++ {
		cur[0] = i
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(y)]
}
