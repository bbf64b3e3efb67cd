package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"barn.dev/lib/catalog"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/tool"
)

type updateCmd struct {
	sourceFlags
	AllowDowngrade bool `name:"allow-downgrade" help:"Accept a revision below the high-water mark (recorded as a downgrade)."`
}

type syncCmd struct {
	repoFlag
	Location       string `arg:"" placeholder:"URL|PATH" help:"Exact catalog.json to activate (its signature is read from LOCATION.minisig)."`
	AllowDowngrade bool   `name:"allow-downgrade" help:"Accept a revision below the high-water mark (recorded as a downgrade)."`
}

type resetCmd struct {
	repoFlag
}

// activationDoc is the result of update, sync and reset.
type activationDoc struct {
	Schema     string          `json:"schema"`
	Repository catalog.Source  `json:"repository"`
	Record     *catalog.Record `json:"record"`
	Warnings   []string        `json:"warnings"`
}

func (d activationDoc) RenderText(w io.Writer) error {
	r := d.Record
	if r.Active == "" {
		_, err := fmt.Fprintf(w, "%s: no active catalog; high-water mark %d kept\n", d.Repository.Root, r.HighestRevision)
		return err
	}
	signer := "unsigned"
	switch {
	case r.Active == catalog.EmbeddedActive:
		signer = "embedded in this binary"
	case r.KeyID != "":
		signer = "signed by " + r.KeyID
	}
	down := ""
	if r.Downgrade {
		down = fmt.Sprintf(" (DOWNGRADE below %d)", r.HighestRevision)
	}
	_, err := fmt.Fprintf(w, "%s: catalog revision %d active, %s%s\n", d.Repository.Root, r.ActiveRevision, signer, down)
	return err
}

func (c *updateCmd) Run(env *tool.Env) error {
	cl, err := openClient(env)
	if err != nil {
		return err
	}
	src, err := cl.source(env, c.sourceFlags)
	if err != nil {
		return err
	}
	return activate(env, cl, src, src.CatalogLocation(), c.AllowDowngrade, "barn.repo.update/v1")
}

func (c *syncCmd) Run(env *tool.Env) error {
	cl, err := openClient(env)
	if err != nil {
		return err
	}
	src, err := cl.source(env, c.sources())
	if err != nil {
		return err
	}
	loc := c.Location
	if !strings.Contains(loc, "://") {
		if loc, err = filepath.Abs(loc); err != nil {
			return exitcode.Wrap(exitcode.Usage, err, "%s", c.Location)
		}
	}
	return activate(env, cl, src, loc, c.AllowDowngrade, "barn.repo.sync/v1")
}

func activate(env *tool.Env, cl *client, src catalog.Source, loc string, allowDowngrade bool, schema string) error {
	data, sig, err := catalog.Fetch(env.Ctx, loc)
	if err != nil {
		return err
	}
	l, err := cl.lock(env, "barn-repo update")
	if err != nil {
		return err
	}
	defer l.Unlock()
	act, err := cl.store.Activate(src, data, sig, catalog.ActivateOptions{AllowDowngrade: allowDowngrade, ExactLocation: loc})
	if err != nil {
		return err
	}
	for _, w := range act.Warnings {
		env.Stderrf("barn-repo: warning: %s", w)
	}
	if act.Record.Downgrade {
		env.Stderrf("barn-repo: warning: revision %d is a recorded downgrade below %d", act.Record.ActiveRevision, act.Record.HighestRevision)
	}
	return env.Emit(activationDoc{Schema: schema, Repository: src, Record: act.Record, Warnings: act.Warnings})
}

func (c *resetCmd) Run(env *tool.Env) error {
	return withRecord(env, c.repoFlag, "barn-repo reset", func(cl *client, src catalog.Source) (*activationDoc, error) {
		rec, err := cl.store.Reset(src)
		return &activationDoc{Schema: "barn.repo.reset/v1", Repository: src, Record: rec, Warnings: []string{}}, err
	})
}

// withRecord runs fn on the repository f selects while holding the image
// cache lock (which serialises every catalog record change), and emits the
// document it returns.
func withRecord(env *tool.Env, f repoFlag, command string, fn func(*client, catalog.Source) (*activationDoc, error)) error {
	cl, err := openClient(env)
	if err != nil {
		return err
	}
	src, err := cl.source(env, f.sources())
	if err != nil {
		return err
	}
	l, err := cl.lock(env, command)
	if err != nil {
		return err
	}
	defer l.Unlock()
	doc, err := fn(cl, src)
	if err != nil {
		return err
	}
	return env.Emit(*doc)
}
