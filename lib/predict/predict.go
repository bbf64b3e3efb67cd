// Package predict lists the words shell completion offers for Barn's open
// values, read from the real world at completion time: node names from the
// applied state, image selectors and aliases from the active catalog.
//
// Completion runs on every Tab, so every function here only reads (the
// state root is opened with state.Inspect, which creates nothing), takes
// no lock, and returns nil on any error instead of reporting it: a broken
// state root must never make the shell print an error mid-line.
package predict

import (
	"sort"

	"barn.dev/lib/catalog"
	"barn.dev/lib/state"
)

// Nodes returns the applied deployment's node names and every node
// directory in the state root (a node being created or destroyed has a
// directory before or after it is in state.json), sorted.
func Nodes(getenv func(string) string) []string {
	root, err := state.Inspect(getenv)
	if err != nil || !root.Exists() {
		return nil
	}
	seen := map[string]bool{}
	if d, err := root.ReadDeployment(); err == nil && d != nil {
		for _, n := range d.Spec.Nodes {
			seen[n.Name] = true
		}
	}
	if dirs, err := root.NodeNames(); err == nil {
		for _, n := range dirs {
			seen[n] = true
		}
	}
	return sorted(seen)
}

// Images returns every selector the selected repository's active catalog
// answers: each family, family:channel, family@version and alias, plus the
// local-NAME of every named import. src is the selected repository (the
// caller applies --repo > BARN_REPO > the official repository, whose
// embedded catalog answers even before the state root exists).
func Images(getenv func(string) string, src func(*catalog.Store) (catalog.Source, error)) []string {
	root, err := state.Inspect(getenv)
	if err != nil {
		return nil
	}
	store := &catalog.Store{Dir: root.ImagesDir(), Now: root.Now}
	seen := map[string]bool{}
	if s, err := src(store); err == nil {
		if cat, _, err := store.Active(s); err == nil {
			for fam, im := range cat.Images {
				seen[fam] = true
				for ch := range im.Channels {
					seen[fam+":"+ch] = true
				}
				for v := range im.Versions {
					seen[fam+"@"+v] = true
				}
				for _, a := range im.Aliases {
					seen[a] = true
				}
			}
		}
	}
	if local, err := catalog.ReadLocal(root.ImagesDir()); err == nil {
		for _, im := range local.Images {
			if im.Name != "" {
				seen[im.Name] = true
			}
		}
	}
	return sorted(seen)
}

func sorted(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
