package cli_test

import (
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"barn.dev/barn-inventory/cli"
	"barn.dev/lib/scripttest"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"barn-inventory": scripttest.Command(cli.Main),
	})
}

// TestScripts runs testdata/script/*.txtar; BARN_UPDATE=1 rewrites the
// golden sections.
func TestScripts(t *testing.T) {
	scripttest.Run(t, scripttest.Configure(testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("BARN_HOME", env.WorkDir+"/.barn")
			return nil
		},
	}))
}
