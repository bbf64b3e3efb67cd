package inventory

import (
	"barn.dev/lib/inventory/yaml11"
)

const (
	yamlStr   = yaml11.Str
	yamlInt   = yaml11.Int
	yamlFloat = yaml11.Float
)
