package quote

import (
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// YAMLNode is s as a double-quoted YAML scalar node (with tag, "" for
// none): double quotes make every YAML 1.1 and 1.2 reader (cloud-init's and
// Ansible's PyYAML among them) read exactly the string s, never a number,
// boolean, null, timestamp or sexagesimal. The encoder escapes what
// double-quoted scalars cannot hold raw (YAML 1.1 §5.7: control
// characters, line and paragraph separators) and never folds the line.
func YAMLNode(s, tag string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Style: yaml.DoubleQuotedStyle, Tag: tag, Value: s}
}

// YAML returns s as one double-quoted YAML scalar on one line, for text
// written around it (a flow value after "key: "). It refuses strings that
// are not valid UTF-8, which YAML cannot carry.
func YAML(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", refuse("a YAML string", s, "not valid UTF-8")
	}
	b, err := yaml.Marshal(YAMLNode(s, ""))
	if err != nil {
		return "", refuse("a YAML string", s, err.Error())
	}
	return strings.TrimSuffix(string(b), "\n"), nil
}
