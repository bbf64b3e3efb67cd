package plan

import (
	"fmt"
	"slices"
	"strings"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/human"
)

// UnknownNode is the Detail of the usage error for an unknown node
// selector.
type UnknownNode struct {
	Unknown []string `json:"unknown"`
	Known   []string `json:"known"`
	Suggest []string `json:"suggest"` // near misses, one per unknown name that has one
}

// selection resolves node selectors against the known node names (desired
// and committed). It returns nil for "every node". An unknown name is a
// usage error (reason "unknown_node") listing the known nodes and the
// nearest known name when one is within edit distance 2 (1 for names of
// four characters or fewer).
func selection(selectors, known []string) (map[string]bool, error) {
	if len(selectors) == 0 {
		return nil, nil
	}
	isKnown := make(map[string]bool, len(known))
	for _, k := range known {
		isKnown[k] = true
	}
	sel := make(map[string]bool, len(selectors))
	var unknown, suggest []string
	for _, s := range selectors {
		if isKnown[s] {
			sel[s] = true
			continue
		}
		if slices.Contains(unknown, s) {
			continue
		}
		unknown = append(unknown, s)
		if m := NearMiss(s, known); m != "" {
			suggest = append(suggest, m)
		}
	}
	if len(unknown) == 0 {
		return sel, nil
	}
	list := strings.Join(known, ", ")
	if list == "" {
		list = "(none)"
	}
	msg := fmt.Sprintf("unknown node %s; known nodes: %s", quoteAll(unknown), list)
	e := exitcode.New(exitcode.Usage, "%s", msg).WithReason("unknown_node").
		WithDetail(UnknownNode{Unknown: unknown, Known: nonNil(known), Suggest: nonNil(suggest)})
	if len(suggest) > 0 {
		e.Message += fmt.Sprintf(" (did you mean %s?)", quoteAll(suggest))
		fixed := make([]string, 0, len(selectors))
		for _, s := range selectors {
			if isKnown[s] {
				fixed = append(fixed, s)
			} else if m := NearMiss(s, known); m != "" {
				fixed = append(fixed, m)
			}
		}
		e = e.WithNext("barn-plan " + strings.Join(fixed, " "))
	} else {
		e = e.WithNext("barn-plan")
	}
	return sel, e
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// NearMiss returns the candidate closest to name within edit distance 2
// (1 when name has four characters or fewer), or "" when none is that
// close. Ties go to the first candidate in order.
func NearMiss(name string, candidates []string) string {
	limit := 2
	if len([]rune(name)) <= 4 {
		limit = 1
	}
	best, bestD := "", limit+1
	for _, c := range candidates {
		if d := human.EditDistance(name, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}
