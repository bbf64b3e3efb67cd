package cli

import (
	"fmt"

	"barn.dev/lib/catalog"
	"barn.dev/lib/predict"
	"barn.dev/lib/state"
	"barn.dev/lib/tool"
)

// Predictors completes image selectors from the selected repository's
// active catalog (--repo is not seen at completion time: BARN_REPO, then
// the configured default).
func (*grammar) Predictors(env *tool.Env) map[string]tool.Predictor {
	return map[string]tool.Predictor{"image": func() []string {
		return predict.Images(env.Getenv, func(s *catalog.Store) (catalog.Source, error) {
			reg, err := s.Registry()
			if err != nil {
				return catalog.Source{}, err
			}
			return catalog.Select("", env.Getenv("BARN_REPO"), reg.DefaultRepo)
		})
	}}
}

// Welcome greets a bare `barn-repo` with the active catalog and what to do next.
func (*grammar) Welcome(env *tool.Env) *tool.Welcome {
	w := &tool.Welcome{Actions: []tool.Action{
		{Command: "barn-repo update", Why: "fetch, verify and activate the repository's catalog"},
		{Command: "barn-repo list", Why: "the images it offers"},
		{Command: "barn-repo pull SELECTOR", Why: "download and verify one into the cache"},
	}}
	root, err := state.Inspect(env.Getenv)
	if err != nil {
		w.State = err.Error()
		return w
	}
	store := &catalog.Store{Dir: root.ImagesDir(), Now: root.Now}
	reg, err := store.Registry()
	if err != nil {
		w.State = err.Error()
		return w
	}
	src, err := catalog.Select("", env.Getenv("BARN_REPO"), reg.DefaultRepo)
	if err != nil {
		w.State = err.Error()
		return w
	}
	if _, rec, err := store.Active(src); err == nil && rec != nil {
		w.State = fmt.Sprintf("%s: catalog revision %d active", src.Root, rec.ActiveRevision)
	} else {
		w.State = src.Root + ": no catalog activated yet"
	}
	return w
}
