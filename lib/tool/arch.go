package tool

import (
	"fmt"

	"github.com/alecthomas/kong"

	"barn.dev/lib/spec"
)

// Arch is an --arch flag value read by spec.ParseArch: any case, the
// aliases x86_64/x64 and aarch64/a64, stored as Barn's name (native, amd64
// or arm64). Anything else fails the parse (usage, exit 2) naming the flag
// and every spelling. Tag it `predictor:"arch"` to complete the spellings.
type Arch string

// Decode implements kong.MapperValue.
func (a *Arch) Decode(ctx *kong.DecodeContext) error {
	var s string
	if err := ctx.Scan.PopValueInto("arch", &s); err != nil {
		return err
	}
	c, v := spec.ParseArch(s)
	if v != nil {
		return fmt.Errorf("%q is an %s: %s", s, v.Problem, v.Hint)
	}
	*a = Arch(c)
	return nil
}
