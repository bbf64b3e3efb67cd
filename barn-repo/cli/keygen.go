package cli

import (
	"fmt"
	"io"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/repository"
	"barn.dev/lib/tool"
)

type keygenCmd struct {
	Out         string `name:"out" required:"" placeholder:"PREFIX" help:"Write PREFIX.key (secret, 0600) and PREFIX.pub."`
	PasswordEnv string `name:"password-env" placeholder:"NAME" help:"Encrypt the secret key with the password in environment variable NAME. Without it the secret key is stored unencrypted (lab repositories only)."`
}

type keygenDoc struct{ *repository.KeygenResult }

func (d keygenDoc) RenderText(w io.Writer) error {
	_, err := fmt.Fprintf(w, "key %s: secret %s, public %s\n", d.KeyID, d.SecretKey, d.PublicKey)
	return err
}

func (c *keygenCmd) Run(env *tool.Env) error {
	password, err := passwordFrom(env, c.PasswordEnv)
	if err != nil {
		return err
	}
	res, err := repository.Keygen(c.Out, password)
	if err != nil {
		return err
	}
	if !res.Encrypted {
		env.Stderrf("barn-repo: note: %s is stored unencrypted; keep it off shared machines (use --password-env for anything beyond a lab)", res.SecretKey)
	}
	return env.Emit(keygenDoc{res})
}

func passwordFrom(env *tool.Env, name string) (string, error) {
	if name == "" {
		return "", nil
	}
	p := env.Getenv(name)
	if p == "" {
		return "", exitcode.New(exitcode.Usage, "--password-env %s: the variable is empty or unset", name)
	}
	return p, nil
}
