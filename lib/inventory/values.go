package inventory

import (
	"fmt"
	"math"
	"strings"

	"go.yaml.in/yaml/v3"

	"barn.dev/lib/inventory/yaml11"
	"barn.dev/lib/lazyre"
)

// val reads one consumed setting of one host into Go values, recording a
// problem (with host, key, origin and value as written) on any failure.
type val struct {
	r    *reader
	host string
	s    *setting
	ok   bool
}

// val starts reading setting s of host; problems are reported in the file
// s is written in.
func (r *reader) val(host string, s *setting) *val {
	if s.src != nil {
		r = s.src
	}
	return &val{r: r, host: host, s: s, ok: true}
}

// fail records a problem about node n (a part of the setting's value).
func (v *val) fail(n *yaml.Node, key, msg, hint string) {
	v.ok = false
	if key == "" {
		key = v.s.Key
	}
	v.r.at(n, Problem{Host: v.host, Key: key, Value: written(n), Origin: v.s.Origin, Message: msg, Hint: hint})
}

// scalar returns n as a resolved scalar, refusing collections, Jinja and
// unknown tags.
func (v *val) scalar(n *yaml.Node, key, want string) (yaml11.Scalar, bool) {
	n = v.r.deref(n)
	if n == nil {
		v.ok = false
		return yaml11.Scalar{}, false
	}
	if n.Kind != yaml.ScalarNode {
		v.fail(n, key, "must be "+want+", not a "+kindName(n), "")
		return yaml11.Scalar{}, false
	}
	s := scalarOf(n)
	if s.Kind == yaml11.Str && hasJinja(s.Spelling) {
		v.fail(n, key, "cannot evaluate Jinja; Barn reads literal values only", "give a literal value")
		return s, false
	}
	if s.Kind == yaml11.Other {
		v.fail(n, key, fmt.Sprintf("tag %s is not supported here", n.Tag), "write a plain literal value")
		return s, false
	}
	return s, true
}

func hasJinja(s string) bool {
	return strings.Contains(s, "{{") || strings.Contains(s, "{%") || strings.Contains(s, "{#")
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	}
	return "scalar"
}

// str reads a string. Plain scalars that YAML 1.1 reads as another type
// are refused with a quoting hint.
func (v *val) str(n *yaml.Node, key string) (string, bool) {
	s, ok := v.scalar(n, key, "a string")
	if !ok {
		return "", false
	}
	switch s.Kind {
	case yaml11.Str:
		return s.Spelling, true
	case yaml11.Null:
		v.fail(n, key, "is empty (null)", "give a value or remove the key")
	default:
		v.fail(n, key, fmt.Sprintf("YAML 1.1 (Ansible) reads %s as %s, not a string", s.Spelling, withArticle(s.Kind.String())), fmt.Sprintf("quote it: %q", s.Spelling))
	}
	return "", false
}

// boolean reads a YAML 1.1 boolean (true/false/yes/no/on/off as Ansible).
func (v *val) boolean(n *yaml.Node, key string) (bool, bool) {
	s, ok := v.scalar(n, key, "true or false")
	if !ok {
		return false, false
	}
	if s.Kind == yaml11.Bool {
		return s.Bool, true
	}
	if s.Kind == yaml11.Str && yaml11.ImplicitKind(s.Spelling) == yaml11.Bool {
		v.fail(n, key, fmt.Sprintf("a quoted %q is a string, not a boolean", s.Spelling), "write true or false without quotes")
		return false, false
	}
	v.fail(n, key, fmt.Sprintf("must be true or false, not a %s", s.Kind), "write true or false")
	return false, false
}

// integer reads a decimal integer in [lo, hi]. Anything YAML 1.1 reads
// differently from how it looks (08, 010, 1:30, 1_000, 0x10, +5, 2.0, yes)
// is refused with the unambiguous spelling.
func (v *val) integer(n *yaml.Node, key string, lo, hi int64) (int64, bool) {
	s, ok := v.scalar(n, key, "an integer")
	if !ok {
		return 0, false
	}
	i, ok := v.intOf(n, key, s)
	if !ok {
		return 0, false
	}
	if i < lo || i > hi {
		v.fail(n, key, fmt.Sprintf("must be between %d and %d", lo, hi), "")
		return 0, false
	}
	return i, true
}

func (v *val) intOf(n *yaml.Node, key string, s yaml11.Scalar) (int64, bool) {
	switch s.Kind {
	case yaml11.Int:
		if s.IntOverflow {
			v.fail(n, key, "integer is too large", "")
			return 0, false
		}
		if !s.Canonical() {
			v.fail(n, key, fmt.Sprintf("YAML 1.1 (Ansible) reads %s as %d (%s)", s.Spelling, s.Int, intForm(s.Spelling)), fmt.Sprintf("write %d", s.Int))
			return 0, false
		}
		return s.Int, true
	case yaml11.Float:
		if s.Float == float64(int64(s.Float)) && !strings.Contains(s.Spelling, ":") {
			v.fail(n, key, "is a float; an integer is expected", fmt.Sprintf("write %d", int64(s.Float)))
		} else {
			v.fail(n, key, fmt.Sprintf("YAML 1.1 (Ansible) reads %s as the float %s; an integer is expected", s.Spelling, yaml11.PythonFloat(s.Float)), "write a whole number")
		}
		return 0, false
	case yaml11.Str:
		if yaml11.LooksNumeric(s.Spelling) {
			clean := strings.TrimLeft(strings.ReplaceAll(strings.TrimPrefix(s.Spelling, "+"), "_", ""), "0")
			if clean == "" {
				clean = "0"
			}
			if s.Quoted {
				v.fail(n, key, "a quoted number is a string", "write "+clean+" without quotes")
			} else {
				v.fail(n, key, fmt.Sprintf("YAML 1.1 (Ansible) reads %s as the string %q, not a number", s.Spelling, s.Spelling), "write "+clean)
			}
			return 0, false
		}
	case yaml11.Bool:
		v.fail(n, key, fmt.Sprintf("YAML 1.1 (Ansible) reads %s as the boolean %t", s.Spelling, s.Bool), "write an integer")
		return 0, false
	}
	v.fail(n, key, fmt.Sprintf("must be an integer, not a %s", s.Kind), "write an integer")
	return 0, false
}

func intForm(sp string) string {
	t := strings.TrimLeft(sp, "+-")
	switch {
	case strings.Contains(sp, ":"):
		return "base 60"
	case strings.HasPrefix(t, "0x"):
		return "hexadecimal"
	case strings.HasPrefix(t, "0b"):
		return "binary"
	case strings.HasPrefix(t, "0") && len(t) > 1:
		return "octal"
	case strings.Contains(sp, "_"):
		return "underscores are dropped"
	case strings.HasPrefix(sp, "+"):
		return "explicit sign"
	}
	return "non-canonical spelling"
}

// size reads a size: a bare integer counts unit bytes (MiB for memory, GiB
// for disks), a string must be a positive integer and one unit.
func (v *val) size(n *yaml.Node, key string, unit int64, unitName string) (int64, bool) {
	s, ok := v.scalar(n, key, "a size")
	if !ok {
		return 0, false
	}
	if s.Kind == yaml11.Str && !(yaml11.LooksNumeric(s.Spelling)) {
		b, hint, err := ParseSize(s.Spelling)
		if err != nil {
			v.fail(n, key, err.Error(), hint)
			return 0, false
		}
		return b, true
	}
	if s.Kind == yaml11.Float {
		v.fail(n, key, fmt.Sprintf("a size must be a whole number (plain integers are %s)", unitName), fmt.Sprintf("write a whole number with a unit, e.g. %s", floatSizeHint(s.Float, unit, unitName)))
		return 0, false
	}
	if s.Kind == yaml11.Str && s.Quoted {
		v.fail(n, key, "a quoted number is not a size", fmt.Sprintf("write %s unquoted (%s) or with a unit such as %s%s", strings.TrimLeft(s.Spelling, "0"), unitName, strings.TrimLeft(s.Spelling, "0"), unitName))
		return 0, false
	}
	i, ok := v.intOf(n, key, s)
	if !ok {
		return 0, false
	}
	if i <= 0 {
		v.fail(n, key, "a size must be positive", "")
		return 0, false
	}
	if i > (1<<62)/unit {
		v.fail(n, key, "size is too large", "")
		return 0, false
	}
	return i * unit, true
}

func floatSizeHint(f float64, unit int64, unitName string) string {
	b := int64(f * float64(unit))
	if b%(1<<20) == 0 && b > 0 {
		return fmt.Sprintf("%dMiB", b>>20)
	}
	return "8" + unitName
}

// list returns the items of a sequence (nil, false when n is not one).
func (v *val) list(n *yaml.Node, key, example string) ([]*yaml.Node, bool) {
	n = v.r.deref(n)
	if n == nil {
		v.ok = false
		return nil, false
	}
	if n.Kind != yaml.SequenceNode {
		if n.Kind == yaml.ScalarNode && isNull(n) {
			v.fail(n, key, "is empty (null)", "write [] for none")
			return nil, false
		}
		v.fail(n, key, "must be a list", "write "+example)
		return nil, false
	}
	return n.Content, true
}

// fields returns the entries of a mapping item, refusing keys outside
// allowed with a suggestion.
func (v *val) fields(n *yaml.Node, key string, allowed []string) (map[string]*yaml.Node, bool) {
	n = v.r.deref(n)
	if n == nil {
		v.ok = false
		return nil, false
	}
	if n.Kind != yaml.MappingNode {
		v.fail(n, key, "each item must be a mapping", "write {"+strings.Join(allowed, ": …, ")+": …}")
		return nil, false
	}
	out := map[string]*yaml.Node{}
	good := true
	for _, e := range v.r.flatMap(n, nil) {
		known := false
		for _, a := range allowed {
			known = known || a == e.Key
		}
		if !known {
			hint := "allowed keys: " + strings.Join(allowed, ", ")
			if s := suggest(e.Key, allowed); s != "" {
				hint = "did you mean " + s
			}
			v.fail(e.KeyNode, key, fmt.Sprintf("unknown key %q", e.Key), hint)
			good = false
			continue
		}
		out[e.Key] = e.Value
	}
	return out, good
}

// priority checks an ansible_group_priority spelling, given Ansible's
// reading of it (ansibleInt: p, ok). Barn accepts only plain integers,
// written bare or quoted, whose int() nobody misreads; any other spelling
// is a problem that states the priority Ansible uses (Problem.Ansible),
// or that Ansible's int() fails on it, and with it the inventory.
func (v *val) priority(n *yaml.Node, p int64, ok bool) {
	n = v.r.deref(n)
	if n == nil || n.Kind != yaml.ScalarNode {
		v.fail(n, "", "must be an integer (Ansible's int() fails on it, and with it the inventory)", "write an integer such as 10")
		return
	}
	s := scalarOf(n)
	switch {
	case s.Kind == yaml11.Int && s.Canonical() && s.Int > -1<<31 && s.Int < 1<<31:
		return
	case s.Kind == yaml11.Str && reCanonicalPriority.MatchString(s.Spelling):
		return
	case !ok:
		v.fail(n, "", "Ansible's int() fails on it, and with it the whole inventory", "write a plain integer such as 10")
		return
	}
	why := fmt.Sprintf("Ansible reads %q as the priority %d", s.Spelling, p)
	switch s.Kind {
	case yaml11.Int:
		why = fmt.Sprintf("YAML 1.1 (Ansible) reads %q as the priority %d (%s)", s.Spelling, p, intForm(s.Spelling))
	case yaml11.Float:
		why = fmt.Sprintf("Ansible truncates %q to the priority %d", s.Spelling, p)
	}
	v.ok = false
	v.r.at(n, Problem{Key: v.s.Key, Value: written(n), Origin: v.s.Origin, Message: why + "; Barn reads only plain integers here", Hint: fmt.Sprintf("write %d", p),
		Ansible: &Pick{Value: p, Written: written(n), File: v.r.file, Line: n.Line, Origin: v.s.Origin, Why: "Group.set_variable: int() of the value"}})
}

// ansibleInt is Python's int() of the value PyYAML constructs for n, as
// Group.set_variable applies it to ansible_group_priority: false when
// int() fails (None, dates, collections, text that is no integer).
func ansibleInt(r *reader, n *yaml.Node) (int64, bool) {
	n = r.deref(n)
	if n == nil || n.Kind != yaml.ScalarNode {
		return 0, false
	}
	s := scalarOf(n)
	switch s.Kind {
	case yaml11.Int:
		if s.IntOverflow {
			return 0, false
		}
		return s.Int, true
	case yaml11.Bool:
		if s.Bool {
			return 1, true
		}
		return 0, true
	case yaml11.Float:
		if math.IsNaN(s.Float) || math.IsInf(s.Float, 0) || math.Abs(s.Float) >= 1<<62 {
			return 0, false
		}
		return int64(s.Float), true
	case yaml11.Str:
		if i, ok := pyInt(s.Spelling); ok && i.IsInt64() {
			return i.Int64(), true
		}
	}
	return 0, false
}

var reCanonicalPriority = lazyre.New(`^-?(?:0|[1-9][0-9]{0,8})$`)

func withArticle(s string) string {
	if s != "" && strings.ContainsRune("aeiou", rune(s[0])) {
		return "an " + s
	}
	return "a " + s
}
