package inventory

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"

	"barn.dev/lib/lazyre"
)

// Limits of the reader (reference behaviour §1.1).
const (
	MaxInventoryBytes = 4 << 20 // a file is at most 4 MiB
	maxAliasChain     = 32      // nested alias expansions within one value
	maxGroupDepth     = 64      // group nesting
	maxValueDepth     = 64      // nesting of a consumed value
	maxWork           = 1 << 20 // nodes visited per file: bounds alias bombs
)

// session is what every file of one inventory shares: the problem list and
// the work budget.
type session struct {
	probs problems
	work  int
	stop  bool // the work budget is exhausted: give up quietly
}

// reader walks one parsed YAML (or JSON) document of one file, expanding
// aliases and merge keys, and records problems with positions in that file.
type reader struct {
	file string
	*session
}

// newReader starts a session with one file.
func newReader(file string) *reader { return &reader{file: file, session: &session{}} }

// sibling is a reader of another file in the same session.
func (r *reader) sibling(file string) *reader { return &reader{file: file, session: r.session} }

var reYAMLLine = lazyre.New(`^yaml: line (\d+): (.*)$`)

// parseDocument parses an inventory file into its root node (nil after a
// problem). Like Ansible's DataLoader it first tries JSON (json.loads),
// then one YAML document; an empty one is a problem.
func (r *reader) parseDocument(data []byte) *yaml.Node {
	if len(data) > MaxInventoryBytes {
		r.fileProblem("inventory is larger than 4 MiB", "split it or remove unused parts")
		return nil
	}
	root, ok := r.parseData(data)
	if ok && (root == nil || isNull(root)) {
		r.fileProblem("inventory is empty", "write an inventory with an all: group, e.g. barn-inventory init")
		return nil
	}
	return root
}

// parseData parses one file as Ansible's from_yaml does: JSON when Python's
// json.loads accepts it, else exactly one YAML document. ok is false after
// a problem; root is nil for a document without content.
func (r *reader) parseData(data []byte) (root *yaml.Node, ok bool) {
	switch jsonForm(data) {
	case jsonStrict:
		n, err := jsonNode(data)
		if err != nil {
			r.fileProblem("invalid JSON: "+err.Error(), "")
			return nil, false
		}
		return n, true
	case jsonNonFinite:
		r.fileProblem("JSON with NaN or Infinity: Ansible reads it with Python's json module, Barn does not", "write finite numbers, or the file as YAML")
		return nil, false
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := r.decode(dec, &doc); err != nil {
		return nil, errors.Is(err, io.EOF)
	}
	var second yaml.Node
	switch err := r.decode(dec, &second); {
	case err == nil:
		r.probs.add(Problem{File: r.file, Line: second.Line, Column: second.Column,
			Message: "a file must hold exactly one YAML document", Hint: "remove the second document (after ---) or split it into another file"})
		return nil, false
	case !errors.Is(err, io.EOF):
		return nil, false
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, true
	}
	if !r.constructible(doc.Content[0]) {
		return nil, false
	}
	return doc.Content[0], true
}

// pyyamlTags are the explicit tags Ansible's YAML loader constructs
// (PyYAML's SafeConstructor and Ansible's own !unsafe and !vault).
var pyyamlTags = map[string]bool{"!!str": true, "!!int": true, "!!float": true, "!!bool": true, "!!null": true, "!!timestamp": true,
	"!!binary": true, "!!map": true, "!!seq": true, "!!set": true, "!!omap": true, "!!pairs": true, "!!merge": true,
	"!unsafe": true, "!vault": true, "!vault-encrypted": true}

// constructible reports whether Ansible's loader can construct every node
// of the document, anywhere in it: PyYAML fails on a plain = (YAML 1.1's
// value tag, which SafeConstructor cannot build) and on unknown explicit
// tags, and Ansible then fails on the whole file.
func (r *reader) constructible(root *yaml.Node) bool {
	seen := map[*yaml.Node]bool{}
	ok := true
	var walk func(n *yaml.Node, depth int)
	walk = func(n *yaml.Node, depth int) {
		if n == nil || seen[n] || depth > maxValueDepth+maxGroupDepth || !r.spend() {
			return
		}
		seen[n] = true
		if n.Kind == yaml.AliasNode {
			walk(n.Alias, depth+1)
			return
		}
		switch {
		case n.Style&yaml.TaggedStyle != 0 && !pyyamlTags[n.ShortTag()]:
			r.at(n, Problem{Value: written(n), Message: fmt.Sprintf("Ansible's YAML loader cannot construct the tag %s and fails on the whole file", n.Tag), Hint: "remove the tag"})
			ok = false
		case n.Kind == yaml.ScalarNode && n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle|yaml.TaggedStyle) == 0 && n.Value == "=":
			r.at(n, Problem{Value: "=", Message: "YAML 1.1 (PyYAML) reads a plain = as the value tag, which Ansible cannot construct; Ansible fails on the whole file", Hint: "quote it: '='"})
			ok = false
		}
		for _, c := range n.Content {
			walk(c, depth+1)
		}
	}
	walk(root, 0)
	return ok
}

func (r *reader) decode(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("yaml: %v", p)
			r.fileProblem(fmt.Sprintf("invalid YAML: %v", p), "")
		}
	}()
	err = dec.Decode(n)
	if err != nil && !errors.Is(err, io.EOF) {
		msg := err.Error()
		line := 0
		if m := reYAMLLine.FindStringSubmatch(msg); m != nil {
			fmt.Sscan(m[1], &line)
			msg = m[2]
		} else {
			msg = strings.TrimPrefix(msg, "yaml: ")
		}
		if line > 0 {
			r.probs.add(Problem{File: r.file, Line: line, Column: 1, Message: "invalid YAML at line " + fmt.Sprint(line) + ": " + msg})
		} else {
			r.fileProblem("invalid YAML: "+msg, "")
		}
	}
	return err
}

func (r *reader) fileProblem(msg, hint string) {
	r.probs.add(Problem{File: r.file, Message: msg, Hint: hint})
}

func (r *reader) at(n *yaml.Node, p Problem) {
	p.File = r.file
	if n != nil {
		p.Line, p.Column = n.Line, n.Column
	}
	r.probs.add(p)
}

// spend counts visited nodes; false once the budget is gone.
func (r *reader) spend() bool {
	r.work++
	if r.work > maxWork && !r.stop {
		r.stop = true
		r.fileProblem("inventory expands to too many YAML nodes (alias bomb?)", "reduce alias use")
	}
	return !r.stop
}

// deref follows an alias to its anchored node.
func (r *reader) deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode; i++ {
		if i >= maxAliasChain || n.Alias == nil {
			r.at(n, Problem{Message: "alias chain is longer than 32 links or dangling"})
			return nil
		}
		n = n.Alias
	}
	return n
}

// entry is one key of a flattened mapping.
type entry struct {
	Key     string
	KeyNode *yaml.Node
	Value   *yaml.Node // alias-resolved
	Merged  bool       // came in through a << merge key
}

// flatMap returns the entries of mapping n with merge keys applied as
// PyYAML does: merged pairs first (for `<<: [*a, *b]` the first mapping
// wins; consecutive `<<:` keys apply in order, later winning), then the
// explicit keys, which win. Duplicate explicit keys are problems naming
// both lines. Order is the order of first appearance. stack guards cycles.
func (r *reader) flatMap(n *yaml.Node, stack []*yaml.Node) []entry {
	n = r.deref(n)
	if n == nil || !r.spend() {
		return nil
	}
	for _, s := range stack {
		if s == n {
			r.at(n, Problem{Message: "alias cycle: a mapping merges or contains itself"})
			return nil
		}
	}
	if len(stack) > maxValueDepth {
		r.at(n, Problem{Message: "mapping nesting is deeper than 64 levels"})
		return nil
	}
	stack = append(stack, n)
	var merged, explicit []entry
	firstLine := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := r.deref(n.Content[i]), n.Content[i+1]
		if k == nil {
			continue
		}
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			vd := r.deref(v)
			if vd == nil {
				continue
			}
			switch vd.Kind {
			case yaml.MappingNode:
				for _, e := range r.flatMap(vd, stack) {
					e.Merged = true
					merged = append(merged, e)
				}
			case yaml.SequenceNode:
				var subs [][]entry
				for _, item := range vd.Content {
					it := r.deref(item)
					if it == nil {
						continue
					}
					if it.Kind != yaml.MappingNode {
						r.at(it, Problem{Key: "<<", Value: written(it), Message: "a merge key sequence may hold only mappings", Hint: "write <<: [*a, *b] with anchors of mappings"})
						continue
					}
					subs = append(subs, r.flatMap(it, stack))
				}
				for i := len(subs) - 1; i >= 0; i-- {
					for _, e := range subs[i] {
						e.Merged = true
						merged = append(merged, e)
					}
				}
			default:
				r.at(vd, Problem{Key: "<<", Value: vd.Value, Message: "a merge key needs a mapping or a sequence of mappings", Hint: "write <<: *anchor or <<: [*a, *b]"})
			}
			continue
		}
		if k.Kind != yaml.ScalarNode {
			r.at(k, Problem{Message: "mapping keys must be plain scalars here"})
			continue
		}
		if prev, dup := firstLine[k.Value]; dup {
			r.at(k, Problem{Key: k.Value, Value: written(v), Message: fmt.Sprintf("duplicate key %q (also at line %d)", k.Value, prev.Line),
				Hint: "keep one of them; Ansible would silently use the last"})
			continue
		}
		firstLine[k.Value] = k
		explicit = append(explicit, entry{Key: k.Value, KeyNode: k, Value: v})
	}
	all := append(merged, explicit...)
	index := map[string]int{}
	var out []entry
	for _, e := range all {
		if i, ok := index[e.Key]; ok {
			out[i].Value, out[i].Merged, out[i].KeyNode = e.Value, e.Merged, e.KeyNode
			continue
		}
		index[e.Key] = len(out)
		out = append(out, e)
	}
	return out
}

// generic converts a value node into plain Go values as PyYAML constructs
// them (map[string]any, []any, and yaml11 scalar values), for comparisons
// and for the Ansible cross-check. stack guards cycles.
func (r *reader) generic(n *yaml.Node, stack []*yaml.Node) any {
	n = r.deref(n)
	if n == nil || !r.spend() {
		return nil
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		for _, e := range r.flatMap(n, stack) {
			m[e.Key] = r.generic(e.Value, append(stack, n))
		}
		return m
	case yaml.SequenceNode:
		for _, s := range stack {
			if s == n {
				r.at(n, Problem{Message: "alias cycle: a sequence contains itself"})
				return nil
			}
		}
		if len(stack) > maxValueDepth {
			r.at(n, Problem{Message: "value nesting is deeper than 64 levels"})
			return nil
		}
		out := []any{}
		for _, it := range n.Content {
			out = append(out, r.generic(it, append(stack, n)))
		}
		return out
	case yaml.ScalarNode:
		return scalarOf(n).Value()
	}
	return nil
}
