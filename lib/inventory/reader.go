package inventory

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
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
	dec := yaml.NewDecoder(bytes.NewReader(yaml12As11(data)))
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
	if !r.loadable(doc.Content[0]) {
		return nil, false
	}
	return doc.Content[0], true
}

// reYAMLDirective is a %YAML 1.2 directive line.
var reYAMLDirective = lazyre.New(`^%YAML[ \t]+1\.2(?:[ \t]|$)`)

// yaml12As11 rewrites a %YAML 1.2 directive among the lines before the
// document starts to %YAML 1.1, in place (same length, so positions stay).
// libyaml, and so Ansible, accepts both and reads YAML 1.1 either way;
// yaml.v3 accepts only 1.1.
func yaml12As11(data []byte) []byte {
	var out []byte
	for off := 0; off < len(data); {
		end := bytes.IndexByte(data[off:], '\n')
		if end < 0 {
			end = len(data) - off
		}
		line := data[off : off+end]
		switch t := bytes.TrimSpace(line); {
		case reYAMLDirective.Compiled().Match(line):
			if out == nil {
				out = append([]byte{}, data...)
			}
			copy(out[off:], "%YAML 1.1")
		case len(t) == 0 || t[0] == '#' || (line[0] == '%'):
		default:
			if out == nil {
				return data
			}
			return out
		}
		off += end + 1
	}
	if out == nil {
		return data
	}
	return out
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
	if !r.nested(n, stack, "mapping", "mapping") {
		return nil
	}
	stack = append(stack, n)
	var merged, explicit []entry
	firstLine := map[string]*yaml.Node{}
	explicitAt := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := r.deref(n.Content[i]), n.Content[i+1]
		if k == nil {
			continue
		}
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merged = append(merged, r.mergeKey(n, v, stack)...)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			r.at(k, Problem{Message: "mapping keys must be plain scalars here"})
			continue
		}
		if prev, dup := firstLine[k.Value]; dup {
			r.at(k, Problem{Key: k.Value, Value: written(v), Message: fmt.Sprintf("duplicate key %q (also at line %d)", k.Value, prev.Line),
				Hint: "keep one of them; Ansible would silently use the last"})
			// Read on as Ansible does (the last one wins), so that
			// every value stated beside the refusal is Ansible's.
			explicit[explicitAt[k.Value]] = entry{Key: k.Value, KeyNode: k, Value: v}
			continue
		}
		firstLine[k.Value] = k
		explicitAt[k.Value] = len(explicit)
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

// nested reports whether n may be read inside stack: not one of its own
// ancestors (an alias cycle, which Ansible's recursion limit refuses) and
// no deeper than maxValueDepth; else a problem at n naming the kind of
// node and of nesting.
func (r *reader) nested(n *yaml.Node, stack []*yaml.Node, kind, nesting string) bool {
	if slices.Contains(stack, n) {
		r.at(n, Problem{Message: "alias cycle: a " + kind + " contains itself (Ansible: maximum recursion depth exceeded)"})
		return false
	}
	if len(stack) > maxValueDepth {
		r.at(n, Problem{Message: nesting + " nesting is deeper than 64 levels"})
		return false
	}
	return true
}

// mergeKey returns the entries the merge key "<<: v" of mapping n brings
// in, marked Merged: a mapping's, or a sequence of mappings' with the
// earlier ones winning (PyYAML's order); nothing for n itself.
func (r *reader) mergeKey(n, v *yaml.Node, stack []*yaml.Node) []entry {
	vd := r.deref(v)
	var merged []entry
	switch {
	case vd == nil:
	case vd == n: // PyYAML drops the merge key first: merging a mapping into itself adds nothing
	case vd.Kind == yaml.MappingNode:
		for _, e := range r.flatMap(vd, stack) {
			e.Merged = true
			merged = append(merged, e)
		}
	case vd.Kind == yaml.SequenceNode:
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
	return merged
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
		if !r.nested(n, stack, "sequence", "value") {
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
