package repository

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"barn.dev/lib/catalog"
)

// diffCatalogs lists the dotted paths whose inherited-out values differ
// between the published catalog a and the rebuild b, sorted
// ("images.d12.channels.stable: catalog has \"1\", rebuild gives \"2\"").
func diffCatalogs(a, b *catalog.Catalog) []string {
	var x, y any
	ea, _ := catalog.Encode(a.Materialized())
	eb, _ := catalog.Encode(b.Materialized())
	if json.Unmarshal(ea, &x) != nil || json.Unmarshal(eb, &y) != nil {
		return []string{"catalog.json is not valid JSON"}
	}
	out := []string{}
	diffValues("", x, y, &out)
	sort.Strings(out)
	return out
}

func diffValues(path string, x, y any, out *[]string) {
	xm, xok := x.(map[string]any)
	ym, yok := y.(map[string]any)
	if xok && yok {
		keys := map[string]bool{}
		for k := range xm {
			keys[k] = true
		}
		for k := range ym {
			keys[k] = true
		}
		for k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			diffValues(p, xm[k], ym[k], out)
		}
		return
	}
	xs, _ := json.Marshal(x)
	ys, _ := json.Marshal(y)
	if string(xs) != string(ys) {
		*out = append(*out, fmt.Sprintf("%s: catalog has %s, rebuild gives %s", path, trunc(xs), trunc(ys)))
	}
}

func trunc(b []byte) string {
	if len(b) > 80 {
		return string(b[:77]) + "..."
	}
	if string(b) == "null" {
		return "nothing"
	}
	return string(b)
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
