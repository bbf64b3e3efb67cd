package cli

import (
	"fmt"
	"io"

	"barn.dev/lib/repository"
	"barn.dev/lib/tool"
)

type signCmd struct {
	rootFlag
	Key         string `name:"key" required:"" placeholder:"FILE" help:"Minisign secret key (from barn-repo keygen)."`
	PasswordEnv string `name:"password-env" placeholder:"NAME" help:"Environment variable holding the secret key's password, if it is encrypted."`
}

type signDoc struct{ *repository.SignResult }

func (d signDoc) RenderText(w io.Writer) error {
	_, err := fmt.Fprintf(w, "%s: signed revision %d with key %s\n", d.Path, d.Revision, d.KeyID)
	return err
}

func (c *signCmd) Run(env *tool.Env) error {
	root, err := c.dir()
	if err != nil {
		return err
	}
	password, err := passwordFrom(env, c.PasswordEnv)
	if err != nil {
		return err
	}
	res, err := repository.Sign(root, c.Key, password)
	if err != nil {
		return err
	}
	return env.Emit(signDoc{res})
}
