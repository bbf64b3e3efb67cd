package inventory

import (
	"barn.dev/lib/lazyre"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"barn.dev/lib/inventory/yaml11"
)

// Ansible reads every inventory and vars file with PyYAML (libyaml's
// parser, Ansible's AnsibleConstructor over PyYAML's SafeConstructor) and
// constructs the whole document before it looks at a single group: a value
// nobody consumes still fails the file, and with it the inventory. loadable
// finds everything that makes that construction fail, in any node of the
// document, so that Barn refuses every file Ansible cannot load.

// pyyamlTags are the explicit tags Ansible's YAML loader constructs, with
// the node kind each needs ("" any): PyYAML's SafeConstructor and Ansible's
// own !unsafe and !vault.
var pyyamlTags = map[string]yaml.Kind{"!!str": yaml.ScalarNode, "!!int": yaml.ScalarNode, "!!float": yaml.ScalarNode,
	"!!bool": yaml.ScalarNode, "!!null": yaml.ScalarNode, "!!timestamp": yaml.ScalarNode, "!!binary": yaml.ScalarNode,
	"!!map": yaml.MappingNode, "!!set": yaml.MappingNode, "!!seq": yaml.SequenceNode, "!!omap": yaml.SequenceNode,
	"!!pairs": yaml.SequenceNode, "!!merge": yaml.ScalarNode, "!unsafe": 0, "!vault": yaml.ScalarNode, "!vault-encrypted": yaml.ScalarNode}

// loadable reports whether Ansible's loader constructs the document rooted
// at root; every reason it would not is a problem at its node, stating
// PyYAML's error. Besides construction failures it refuses what
// ansible-inventory cannot print (binary values, sets, values that contain
// themselves), which ends Ansible's run as surely wherever it uses them.
func (r *reader) loadable(root *yaml.Node) bool {
	w := &loadWalk{r: r, anchors: map[string]*yaml.Node{}, done: map[*yaml.Node]bool{}, ok: true}
	w.node(root, nil, false)
	return w.ok
}

type loadWalk struct {
	r       *reader
	anchors map[string]*yaml.Node // first node of each anchor name
	done    map[*yaml.Node]bool
	ok      bool
}

func (w *loadWalk) fail(n *yaml.Node, value, msg, hint string) { w.failKey(n, "", value, msg, hint) }

func (w *loadWalk) failKey(n *yaml.Node, key, value, msg, hint string) {
	w.ok = false
	w.r.at(n, Problem{Key: key, Value: value, Message: msg + "; Ansible fails on the whole file", Hint: hint})
}

// failUse is a value PyYAML builds but Ansible fails on where it uses it
// (every variable's value; a top-level key that is no group is skipped).
func (w *loadWalk) failUse(n *yaml.Node, value, msg, hint string) {
	w.ok = false
	w.r.at(n, Problem{Value: value, Message: msg + "; Ansible fails wherever it uses the value, ansible-inventory on every variable", Hint: hint})
}

// node checks n; path holds the collections above it (an alias to one of
// them makes a value that contains itself); key marks mapping keys.
func (w *loadWalk) node(n *yaml.Node, path []*yaml.Node, key bool) {
	if n == nil || len(path) > maxValueDepth+maxGroupDepth || !w.r.spend() {
		return
	}
	if n.Kind == yaml.AliasNode {
		for _, p := range path {
			if p == n.Alias {
				w.failUse(n, "*"+n.Value, fmt.Sprintf("the alias *%s is inside the value it names, which then contains itself (Python: maximum recursion depth exceeded)", n.Value), "copy the value instead of aliasing it")
				return
			}
		}
		if key && n.Alias != nil && n.Alias.Kind != yaml.ScalarNode {
			w.fail(n, "*"+n.Value, "a mapping key is a "+kindName(n.Alias)+" (PyYAML: found unacceptable key, unhashable type)", "use a scalar key")
		}
		return
	}
	if w.done[n] {
		return
	}
	w.done[n] = true
	if n.Anchor != "" {
		if first := w.anchors[n.Anchor]; first != nil {
			w.fail(n, "&"+n.Anchor, fmt.Sprintf("the anchor &%s is defined twice (first at line %d); PyYAML: found duplicate anchor", n.Anchor, first.Line), "give each anchor its own name")
		} else {
			w.anchors[n.Anchor] = n
		}
	}
	if key && n.Kind != yaml.ScalarNode {
		w.fail(n, written(n), "a mapping key is a "+kindName(n)+" (PyYAML: found unacceptable key, unhashable type)", "use a scalar key")
	}
	w.tagged(n, key)
	switch n.Kind {
	case yaml.ScalarNode:
		return
	case yaml.MappingNode:
		w.merges(n)
	}
	path = append(path, n)
	for i, c := range n.Content {
		isKey := n.Kind == yaml.MappingNode && i%2 == 0
		if n.Kind == yaml.MappingNode && i%2 == 1 && n.Content[i-1].ShortTag() == "!!merge" && n.Content[i-1].Kind == yaml.ScalarNode {
			if c.Kind != yaml.AliasNode { // PyYAML drops a merge key before it merges: an alias there is no recursion
				w.node(c, path, false)
			}
			continue
		}
		w.node(c, path, isKey)
	}
}

// merges checks the << keys of mapping n as PyYAML's flatten_mapping.
func (w *loadWalk) merges(n *yaml.Node) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!merge" {
			continue
		}
		v := w.r.deref(n.Content[i+1])
		if v == nil {
			continue
		}
		switch v.Kind {
		case yaml.MappingNode:
		case yaml.SequenceNode:
			for _, it := range v.Content {
				if it := w.r.deref(it); it != nil && it.Kind != yaml.MappingNode {
					w.failKey(it, "<<", written(it), "a merge key's list holds a "+kindName(it)+" (PyYAML: expected a mapping for merging)", "write <<: [*a, *b] with anchors of mappings")
				}
			}
		default:
			w.failKey(v, "<<", written(v), "a merge key's value is a "+kindName(v)+" (PyYAML: expected a mapping or list of mappings for merging)", "write <<: *anchor or <<: [*a, *b]")
		}
	}
}

// tagged checks that n's tag (explicit, or resolved as YAML 1.1 resolves
// plain scalars) constructs.
func (w *loadWalk) tagged(n *yaml.Node, key bool) {
	explicit := n.Style&yaml.TaggedStyle != 0
	tag := n.ShortTag()
	if explicit {
		want, known := pyyamlTags[tag]
		switch {
		case !known:
			w.fail(n, written(n), fmt.Sprintf("Ansible's YAML loader cannot construct the tag %s (PyYAML: could not determine a constructor)", n.Tag), "remove the tag")
			return
		case want != 0 && n.Kind != want:
			w.fail(n, written(n), fmt.Sprintf("the tag %s needs a %s, not a %s (PyYAML: expected a %s node)", n.Tag, kindWord(want), kindName(n), nodeID(want)), "remove the tag")
			return
		}
		switch tag {
		case "!!binary", "!!set":
			w.failUse(n, written(n), fmt.Sprintf("ansible-inventory cannot print a %s value (Object of type %s is not JSON serializable)", tag, map[string]string{"!!binary": "bytes", "!!set": "set"}[tag]), "write a string or a list")
			return
		case "!!omap", "!!pairs":
			for _, it := range n.Content {
				if it := w.r.deref(it); it == nil || it.Kind != yaml.MappingNode || len(it.Content) != 2 {
					w.fail(n, written(n), fmt.Sprintf("every item of a %s must be a mapping of one key (PyYAML: expected a single mapping item)", tag), "write a plain list or mapping")
					return
				}
			}
		}
	}
	if n.Kind != yaml.ScalarNode {
		return
	}
	quoted := n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0
	if !explicit {
		if quoted {
			return
		}
		if n.Value == "=" && !key { // YAML 1.1's value tag; as a key PyYAML reads it as a string
			w.fail(n, "=", "YAML 1.1 (PyYAML) reads a plain = as the value tag, which Ansible cannot construct", "quote it: '='")
			return
		}
		tag = map[yaml11.Kind]string{yaml11.Int: "!!int", yaml11.Float: "!!float", yaml11.Timestamp: "!!timestamp"}[yaml11.ImplicitKind(n.Value)]
	}
	if err := pyConstruct(tag, n.Value); err != "" {
		w.fail(n, n.Value, fmt.Sprintf("PyYAML cannot construct %q as %s: %s", n.Value, tagWord(tag), err), "quote it to keep it a string")
	}
}

func kindWord(k yaml.Kind) string {
	return map[yaml.Kind]string{yaml.ScalarNode: "scalar", yaml.MappingNode: "mapping", yaml.SequenceNode: "list"}[k]
}

// nodeID is PyYAML's name of a node kind.
func nodeID(k yaml.Kind) string {
	return map[yaml.Kind]string{yaml.ScalarNode: "scalar", yaml.MappingNode: "mapping", yaml.SequenceNode: "sequence"}[k]
}

func tagWord(tag string) string {
	return map[string]string{"!!int": "an integer", "!!float": "a float", "!!bool": "a boolean", "!!timestamp": "a date"}[tag]
}

// pyConstruct runs PyYAML's scalar constructor for tag on v in spirit: ""
// when it succeeds, else Python's error.
func pyConstruct(tag, v string) string {
	switch tag {
	case "!!int":
		if _, _, ok := yaml11.ParseInt(v); !ok {
			return "Python's int() fails on it"
		}
	case "!!float":
		if _, ok := yaml11.ParseFloat(v); !ok {
			return "Python's float() fails on it"
		}
	case "!!bool":
		switch strings.ToLower(v) {
		case "yes", "no", "true", "false", "on", "off":
			return ""
		}
		return fmt.Sprintf("KeyError %q (only yes, no, true, false, on and off)", strings.ToLower(v))
	case "!!timestamp":
		return constructTimestamp(v)
	}
	return ""
}

// reTimestamp is PyYAML's SafeConstructor.timestamp_regexp.
var reTimestamp = lazyre.New(`^([0-9]{4})-([0-9][0-9]?)-([0-9][0-9]?)` +
	`(?:(?:[Tt]|[ \t]+)([0-9][0-9]?):([0-9][0-9]):([0-9][0-9])(?:\.[0-9]*)?` +
	`(?:[ \t]*(Z|([-+])([0-9][0-9]?)(?::([0-9][0-9]))?))?)?$`)

// constructTimestamp is PyYAML's construct_yaml_timestamp: the fields go
// to Python's datetime.timezone, date and datetime, which check them.
func constructTimestamp(v string) string {
	m := reTimestamp.FindStringSubmatch(v)
	if m == nil {
		return "'NoneType' object has no attribute 'groupdict' (not a timestamp)"
	}
	num := func(s string) int {
		n := 0
		fmt.Sscan(s, &n)
		return n
	}
	year, month, day := num(m[1]), num(m[2]), num(m[3])
	if m[8] != "" && num(m[9])*60+num(m[10]) >= 24*60 {
		return "offset must be a timedelta strictly between -timedelta(hours=24) and timedelta(hours=24)"
	}
	switch {
	case year < 1:
		return fmt.Sprintf("year %d is out of range", year)
	case month < 1 || month > 12:
		return "month must be in 1..12"
	case day < 1 || day > daysIn(year, month):
		return "day is out of range for month"
	case m[4] == "":
		return ""
	case num(m[4]) > 23:
		return "hour must be in 0..23"
	case num(m[5]) > 59:
		return "minute must be in 0..59"
	case num(m[6]) > 59:
		return "second must be in 0..59"
	}
	return ""
}

func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
