// Package yaml11 reads YAML scalars the way Ansible does: with the YAML 1.1
// implicit resolvers of PyYAML (bool yes/no/on/off, octal 010, base-60
// 1:30, underscores in numbers, …), not yaml.v3's YAML 1.2 rules.
//
// Source: PyYAML resolver.py and constructor.py (SafeLoader), which
// Ansible's AnsibleLoader uses for inventories.
package yaml11

import (
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"barn.dev/lib/lazyre"
)

// Kind is the YAML 1.1 type a scalar resolves to.
type Kind int

// The kinds a scalar can resolve to.
const (
	Null Kind = iota
	Bool
	Int
	Float
	Str
	Timestamp
	Other // an explicit tag this package does not construct (e.g. !vault)
)

func (k Kind) String() string {
	return [...]string{"null", "boolean", "integer", "float", "string", "timestamp", "tagged value"}[k]
}

// Scalar is one resolved scalar.
type Scalar struct {
	Kind     Kind
	Spelling string // the text as written (without quotes)
	Quoted   bool   // written quoted or as a block scalar
	Bool     bool
	Int      int64 // valid for Int; IntOverflow set when it does not fit
	Float    float64
	Tag      string // explicit tag as written, "" when implicit

	IntOverflow bool
}

// Canonical reports whether an Int or Float scalar is written in the one
// spelling that YAML 1.1 and YAML 1.2 and a human all read the same way:
// plain decimal integers without sign, underscores or leading zeros
// (negative allowed), and floats whose spelling equals their shortest
// decimal form.
func (s Scalar) Canonical() bool {
	switch s.Kind {
	case Int:
		return !s.IntOverflow && reCanonicalInt.MatchString(s.Spelling)
	case Float:
		if math.IsInf(s.Float, 0) || math.IsNaN(s.Float) {
			return false
		}
		return s.Spelling == PythonFloat(s.Float)
	}
	return true
}

// PythonFloat formats f the way Python's repr does for ordinary values
// (12.1, 12.0, 1e+16), which is what Ansible prints.
func PythonFloat(f float64) string {
	if math.IsInf(f, 1) {
		return "inf"
	}
	if math.IsInf(f, -1) {
		return "-inf"
	}
	if math.IsNaN(f) {
		return "nan"
	}
	abs := math.Abs(f)
	if abs != 0 && (abs >= 1e16 || abs < 1e-4) {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		// Python writes 1e+16, Go writes 1e+16: same; keep two-digit exponent as Python does.
		return s
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

var (
	reBool  = lazyre.New(`^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$`)
	reFloat = lazyre.New(`^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?` +
		`|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?` +
		`|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*` +
		`|[-+]?\.(?:inf|Inf|INF)` +
		`|\.(?:nan|NaN|NAN))$`)
	reInt = lazyre.New(`^(?:[-+]?0b[0-1_]+` +
		`|[-+]?0[0-7_]+` +
		`|[-+]?(?:0|[1-9][0-9_]*)` +
		`|[-+]?0x[0-9a-fA-F_]+` +
		`|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$`)
	reNull      = lazyre.New(`^(?:~|null|Null|NULL|)$`)
	reTimestamp = lazyre.New(`^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]` +
		`|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?(?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$`)
	reCanonicalInt = lazyre.New(`^-?(?:0|[1-9][0-9]*)$`)
	reDecimalish   = lazyre.New(`^[-+]?[0-9][0-9_]*$`)
)

// ImplicitKind returns the kind PyYAML gives an untagged plain scalar.
func ImplicitKind(v string) Kind {
	switch {
	case reBool.MatchString(v):
		return Bool
	case reFloat.MatchString(v):
		return Float
	case reInt.MatchString(v):
		return Int
	case reNull.MatchString(v):
		return Null
	case reTimestamp.MatchString(v):
		return Timestamp
	}
	return Str
}

// Resolve resolves a scalar node (n.Kind must be yaml.ScalarNode).
func Resolve(n *yaml.Node) Scalar {
	s := Scalar{Spelling: n.Value}
	explicit := n.Style&yaml.TaggedStyle != 0
	quoted := n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0
	s.Quoted = quoted
	kind := Str
	switch {
	case explicit:
		s.Tag = n.Tag
		switch n.ShortTag() {
		case "!!str":
			kind = Str
		case "!!int":
			kind = Int
		case "!!float":
			kind = Float
		case "!!bool":
			kind = Bool
		case "!!null":
			kind = Null
		case "!!timestamp":
			kind = Timestamp
		default:
			kind = Other
		}
	case quoted:
		kind = Str
	default:
		kind = ImplicitKind(n.Value)
	}
	s.Kind = kind
	switch kind {
	case Bool:
		b, ok := parseBool(n.Value)
		if !ok {
			s.Kind = Other
		}
		s.Bool = b
	case Int:
		i, overflow, ok := ParseInt(n.Value)
		if !ok {
			s.Kind = Other
		}
		s.Int, s.IntOverflow = i, overflow
	case Float:
		f, ok := ParseFloat(n.Value)
		if !ok {
			s.Kind = Other
		}
		s.Float = f
	}
	return s
}

func parseBool(v string) (bool, bool) {
	switch strings.ToLower(v) {
	case "yes", "true", "on":
		return true, true
	case "no", "false", "off":
		return false, true
	}
	return false, false
}

// ParseInt constructs an integer exactly as PyYAML's construct_yaml_int
// does, for implicit and explicit (!!int) scalars alike: underscores
// dropped, one sign, then 0, 0b… binary, 0x… hex, 0… octal, a:b:c base 60
// or decimal, each part through Python's int() (which allows surrounding
// whitespace, another sign and 0o/0b/0x prefixes of its base). ok is false
// where PyYAML fails (then Ansible fails on the file); overflow is set when
// the value does not fit in int64.
func ParseInt(v string) (n int64, overflow, ok bool) {
	v = strings.ReplaceAll(v, "_", "")
	if v == "" {
		return 0, false, false
	}
	neg := v[0] == '-'
	if v[0] == '+' || v[0] == '-' {
		v = v[1:]
	}
	var x *big.Int
	switch {
	case v == "":
		return 0, false, false
	case v == "0":
		return 0, false, true
	case strings.HasPrefix(v, "0b"):
		x, ok = pyInt(v[2:], 2)
	case strings.HasPrefix(v, "0x"):
		x, ok = pyInt(v[2:], 16)
	case v[0] == '0':
		x, ok = pyInt(v, 8)
	case strings.Contains(v, ":"):
		x, ok = big.NewInt(0), true
		for _, part := range strings.Split(v, ":") {
			d, dok := pyInt(part, 10)
			if !dok {
				return 0, false, false
			}
			x.Add(x.Mul(x, big.NewInt(60)), d)
		}
	default:
		x, ok = pyInt(v, 10)
	}
	if !ok {
		return 0, false, false
	}
	if neg {
		x.Neg(x)
	}
	if !x.IsInt64() {
		return 0, true, true
	}
	return x.Int64(), false, true
}

// pyInt is Python's int(s, base) for ASCII text.
func pyInt(s string, base int) (*big.Int, bool) {
	s = strings.Trim(s, pyWhitespace)
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg, s = s[0] == '-', s[1:]
	}
	if prefix := map[int]string{2: "0b", 8: "0o", 16: "0x"}[base]; prefix != "" && strings.HasPrefix(strings.ToLower(s), prefix) {
		s = s[2:]
	}
	if s == "" || strings.ContainsAny(s, "+-_") {
		return nil, false
	}
	x, ok := new(big.Int).SetString(s, base)
	if ok && neg {
		x.Neg(x)
	}
	return x, ok
}

// pyWhitespace is what Python's int() and float() strip (ASCII).
const pyWhitespace = " \t\n\r\v\f"

var rePyFloat = lazyre.New(`^[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[+-]?[0-9]+)?|inf|infinity|nan)$`)

// ParseFloat constructs a float exactly as PyYAML's construct_yaml_float:
// underscores dropped, lower case, one sign, .inf, .nan, a:b base 60 or
// Python's float() (surrounding whitespace, inf, infinity and nan
// allowed). ok is false where PyYAML fails.
func ParseFloat(v string) (float64, bool) {
	v = strings.ToLower(strings.ReplaceAll(v, "_", ""))
	if v == "" {
		return 0, false
	}
	sign := 1.0
	if v[0] == '-' {
		sign = -1
	}
	if v[0] == '+' || v[0] == '-' {
		v = v[1:]
	}
	switch {
	case v == ".inf":
		return sign * math.Inf(1), true
	case v == ".nan":
		return math.NaN(), true
	}
	acc := 0.0
	for _, p := range strings.Split(v, ":") {
		p = strings.Trim(p, pyWhitespace)
		if !rePyFloat.MatchString(p) {
			return 0, false
		}
		d, err := strconv.ParseFloat(p, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return 0, false
		}
		acc = acc*60 + d
	}
	return sign * acc, true
}

// LooksNumeric reports whether a string scalar would be taken for a number
// by a reader (decimal digits, possibly with leading zeros), such as "08"
// which YAML 1.1 reads as a string but YAML 1.2 and humans read as 8.
func LooksNumeric(v string) bool { return reDecimalish.MatchString(v) }

// Value returns the generic Go value PyYAML would construct for s: nil,
// bool, int64, float64 or string (timestamps and other tags stay their
// spelling).
func (s Scalar) Value() any {
	switch s.Kind {
	case Null:
		return nil
	case Bool:
		return s.Bool
	case Int:
		return s.Int
	case Float:
		return s.Float
	}
	return s.Spelling
}
