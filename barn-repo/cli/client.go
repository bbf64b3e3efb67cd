package cli

import (
	"io"
	"path/filepath"
	"strings"

	"barn.dev/lib/catalog"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/imagecache"
	"barn.dev/lib/state"
	"barn.dev/lib/tool"
)

// repoFlag selects a repository: --repo > BARN_REPO > configured default.
type repoFlag struct {
	Repo string `name:"repo" placeholder:"DIR|URL" help:"Repository: a directory, https:// or http:// URL (default: BARN_REPO, then the configured default)."`
}

// client is what every client command needs.
type client struct {
	root  *state.Root
	store *catalog.Store
}

func openClient(env *tool.Env) (*client, error) {
	root, err := state.Open(env.Getenv)
	if err != nil {
		return nil, err
	}
	dir, err := root.EnsureImagesDir()
	if err != nil {
		return nil, err
	}
	return &client{root: root, store: &catalog.Store{Dir: dir, Now: root.Now}}, nil
}

// source applies the repository precedence.
func (c *client) source(env *tool.Env, f repoFlag) (catalog.Source, error) {
	flag := f.Repo
	if flag != "" && !strings.Contains(flag, "://") && !filepath.IsAbs(flag) {
		abs, err := filepath.Abs(flag)
		if err != nil {
			return catalog.Source{}, exitcode.Wrap(exitcode.Usage, err, "--repo %s", flag)
		}
		flag = abs
	}
	reg, err := c.store.Registry()
	if err != nil {
		return catalog.Source{}, err
	}
	return catalog.Select(flag, env.Getenv("BARN_REPO"), reg.DefaultRepo)
}

// active returns the selected repository's active catalog with imports attached.
func (c *client) active(env *tool.Env, f repoFlag) (catalog.Source, *catalog.Catalog, *catalog.Record, error) {
	src, err := c.source(env, f)
	if err != nil {
		return src, nil, nil, err
	}
	cat, rec, err := c.store.Active(src)
	if err != nil {
		return src, nil, rec, err
	}
	local, err := catalog.ReadLocal(c.store.Dir)
	if err != nil {
		return src, nil, rec, err
	}
	return src, cat.WithLocal(local), rec, nil
}

func (c *client) lock(env *tool.Env, command string) (state.Lock, error) {
	return c.root.LockImages(env.Ctx, command, true)
}

func progressWriter(env *tool.Env) io.Writer {
	if env.ErrIsTerminal {
		return imagecache.Terminal{Writer: env.Err}
	}
	return env.Err
}
