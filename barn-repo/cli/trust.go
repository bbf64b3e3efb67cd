package cli

import (
	"fmt"
	"io"
	"os"

	"barn.dev/lib/catalog"
	"barn.dev/lib/exitcode"
	"barn.dev/lib/tool"
)

type trustCmd struct {
	Add  trustAddCmd  `cmd:"" help:"Trust a minisign public key (FILE.pub) to sign catalogs."`
	List trustListCmd `cmd:"" help:"List the trusted catalog keys."`
}

type trustAddCmd struct {
	File string `arg:"" predictor:"pub" placeholder:"FILE.pub" help:"Minisign public key file."`
}

type trustListCmd struct{}

type trustDoc struct {
	Schema string               `json:"schema"`
	Keys   []catalog.TrustedKey `json:"keys"`
}

func (d trustDoc) RenderText(w io.Writer) error {
	if len(d.Keys) == 0 {
		_, err := fmt.Fprintln(w, "no trusted catalog keys")
		return err
	}
	for _, k := range d.Keys {
		fmt.Fprintf(w, "%s  %s\n", k.KeyID, k.Path)
	}
	return nil
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
	return env.Emit(trustDoc{Schema: "barn.repo.trust/v1", Keys: []catalog.TrustedKey{k}})
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
	return env.Emit(trustDoc{Schema: "barn.repo.trust/v1", Keys: keys})
}
