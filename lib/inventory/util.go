package inventory

import (
	"regexp"

	"barn.dev/lib/inventory/yaml11"
)

func regexpMust(s string) *regexp.Regexp { return regexp.MustCompile(s) }

const (
	yamlStr   = yaml11.Str
	yamlInt   = yaml11.Int
	yamlFloat = yaml11.Float
)
