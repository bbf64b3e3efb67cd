package cli

import (
	"errors"
	"fmt"

	"barn.dev/lib/catalog"
	"barn.dev/lib/imageref"
	"barn.dev/lib/predict"
	"barn.dev/lib/state"
	"barn.dev/lib/tool"
)

// Predictors completes image selectors from the selected repository's
// active catalog (--repo is not seen at completion time: BARN_REPO, then
// the official repository).
func (*grammar) Predictors(env *tool.Env) map[string]tool.Predictor {
	return map[string]tool.Predictor{"image": func() []string {
		return predict.Images(env.Getenv, func(*catalog.Store) (catalog.Source, error) {
			return catalog.Select("", false, env.Getenv("BARN_REPO"))
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
	src, err := catalog.Select("", false, env.Getenv("BARN_REPO"))
	if err != nil {
		w.State = err.Error()
		return w
	}
	_, rec, err := store.Active(src)
	switch {
	case err == nil && rec.Active == catalog.EmbeddedActive:
		w.State = fmt.Sprintf("%s: catalog revision %d active (embedded in this binary)", src.Root, rec.ActiveRevision)
	case err == nil:
		w.State = fmt.Sprintf("%s: catalog revision %d active", src.Root, rec.ActiveRevision)
	case errors.Is(err, imageref.ErrNoCatalog):
		w.State = src.Root + ": no catalog activated yet"
	default:
		w.State = err.Error()
	}
	return w
}
