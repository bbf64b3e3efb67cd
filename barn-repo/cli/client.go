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

// repoFlag selects a repository: --repo > BARN_REPO > the official
// repository compiled into Barn.
type repoFlag struct {
	Repo string `name:"repo" placeholder:"DIR|URL" help:"Repository: a directory, https:// or http:// URL (default: BARN_REPO, then the official https://repo.pigsty.io/barn)."`
}

// sourceFlags adds --mirror: the official mirror, below --repo and above
// BARN_REPO (Barn 0.9's precedence). It shares the official repository's
// catalog record; only where bytes are fetched from changes.
type sourceFlags struct {
	repoFlag
	Mirror bool `name:"mirror" help:"Use the official mirror https://repo.pigsty.cc/barn."`
}

func (f repoFlag) sources() sourceFlags { return sourceFlags{repoFlag: f} }

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
func (c *client) source(env *tool.Env, f sourceFlags) (catalog.Source, error) {
	flag := f.Repo
	if flag != "" && !strings.Contains(flag, "://") && !filepath.IsAbs(flag) {
		abs, err := filepath.Abs(flag)
		if err != nil {
			return catalog.Source{}, exitcode.Wrap(exitcode.Usage, err, "--repo %s", flag)
		}
		flag = abs
	}
	return catalog.Select(flag, f.Mirror, env.Getenv("BARN_REPO"))
}

// active returns the selected repository's active catalog with imports attached.
func (c *client) active(env *tool.Env, f sourceFlags) (catalog.Source, *catalog.Catalog, *catalog.Record, error) {
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
