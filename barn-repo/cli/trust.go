package cli

import (
	"fmt"
	"io"
	"os"

	"barn.dev/lib/catalog"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/state"
	"barn.dev/lib/tool"
)

type trustCmd struct {
	Add           trustAddCmd           `cmd:"" help:"Trust a minisign public key (FILE.pub) to sign catalogs of repositories other than the official one."`
	List          trustListCmd          `cmd:"" help:"List the trusted catalog keys (the official repository's compiled keys first)."`
	AllowUnsigned trustAllowUnsignedCmd `cmd:"" name:"allow-unsigned" help:"Let an explicit repository that was signed before publish an unsigned catalog again (recorded in the event log)."`
}

type trustAllowUnsignedCmd struct {
	repoFlag
}

type trustAddCmd struct {
	File string `arg:"" predictor:"pub" placeholder:"FILE.pub" help:"Minisign public key file."`
}

type trustListCmd struct{}

type trustDoc struct {
	Schema   string               `json:"schema"`
	Official []string             `json:"official"` // key IDs compiled into Barn
	Keys     []catalog.TrustedKey `json:"keys"`     // keys added with trust add
}

func (d trustDoc) RenderText(w io.Writer) error {
	for _, id := range d.Official {
		fmt.Fprintf(w, "%s  compiled in (official repository and every other)\n", id)
	}
	for _, k := range d.Keys {
		fmt.Fprintf(w, "%s  %s\n", k.KeyID, k.Path)
	}
	return nil
}

func officialKeyIDs() []string {
	ids := []string{}
	for _, k := range catalog.OfficialRepository().Keys {
		ids = append(ids, catalog.KeyID(k.ID()))
	}
	return ids
}

func (c *trustAddCmd) Run(env *tool.Env) error {
	text, err := os.ReadFile(c.File)
	if err != nil {
		return exitcode.Wrap(exitcode.Usage, err, "reading public key")
	}
	cl, err := openClient(env)
	if err != nil {
		return err
	}
	l, err := cl.lock(env, "barn-repo trust add")
	if err != nil {
		return err
	}
	defer l.Unlock()
	k, err := cl.store.AddTrust(text)
	if err != nil {
		return err
	}
	return env.Emit(trustDoc{Schema: "barn.repo.trust/v1", Official: officialKeyIDs(), Keys: []catalog.TrustedKey{k}})
}

func (c *trustListCmd) Run(env *tool.Env) error {
	cl, err := openClient(env)
	if err != nil {
		return err
	}
	keys, err := cl.store.TrustedKeys()
	if err != nil {
		return err
	}
	return env.Emit(trustDoc{Schema: "barn.repo.trust/v1", Official: officialKeyIDs(), Keys: keys})
}

func (c *trustAllowUnsignedCmd) Run(env *tool.Env) error {
	return withRecord(env, c.repoFlag, "barn-repo trust allow-unsigned", func(cl *client, src catalog.Source) (*activationDoc, error) {
		rec, changed, err := cl.store.AllowUnsigned(src)
		if err != nil {
			return nil, err
		}
		doc := &activationDoc{Schema: "barn.repo.allow-unsigned/v1", Repository: src, Record: rec, Warnings: []string{}}
		if changed {
			msg := fmt.Sprintf("signature requirement lifted for %s (last signed by %s): its next catalog may be unsigned", src.Root, rec.SignedBy)
			if err := cl.root.AppendEvent(state.Event{Level: "warn", Action: "catalog.allow-unsigned", Message: msg}); err != nil {
				return nil, err
			}
			doc.Warnings = append(doc.Warnings, msg)
			env.Stderrf("barn-repo: warning: %s", msg)
		}
		return doc, nil
	})
}
