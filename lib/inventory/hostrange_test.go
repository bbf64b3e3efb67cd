package inventory

import (
	"reflect"
	"strings"
	"testing"
)

// TestHostRangesAreAnsibles: every row is what ansible-core 2.14's yaml
// inventory plugin (_expand_hostpattern) answers for the key; "" means it
// fails. Barn expands to the same hosts or fails on the same keys.
func TestHostRangesAreAnsibles(t *testing.T) {
	for _, c := range []struct {
		key  string
		want string // Ansible's hosts, space separated; "-" for none; "" for a failure
	}{
		{"10.10.10.[11:13]", "10.10.10.11 10.10.10.12 10.10.10.13"},
		{"10.10.10.[11:13:]", ""}, // issue 24 case 2: int('') fails
		{"10.10.10.[11:13:2]", "10.10.10.11 10.10.10.13"},
		{"10.10.10.[11:13:-1]", "-"},
		{"10.10.10.[13:11]", "-"},
		{"10.10.10.[13:11:-1]", "10.10.10.13"},
		{"10.10.10.[11:13:0]", ""},
		{"10.10.10.[11]", ""},
		{"10.10.10.[11:13", ""},
		{"10.10.10.[1_1:13]", "10.10.10.11 10.10.10.12 10.10.10.13"},
		{"10.10.10.[ 11: 13]", "10.10.10.11 10.10.10.12 10.10.10.13"},
		{"10.10.10.[:3]", "10.10.10.0 10.10.10.1 10.10.10.2 10.10.10.3"},
		{"10.10.10.[1:]", ""},
		{"10.10.10.[01:3]", ""},
		{"10.10.10.[08:10]", "10.10.10.08 10.10.10.09 10.10.10.10"},
		{"10.10.[10:11].[1:2]", "10.10.10.1 10.10.10.2 10.10.11.1 10.10.11.2"},
		{"10.10.10.[a:c]", "10.10.10.a 10.10.10.b 10.10.10.c"},
		{"10.10.10.[ab:cd]", "10.10.10.a 10.10.10.b 10.10.10.c"},
		{"10.10.10.[z:B]", "10.10.10.z 10.10.10.A 10.10.10.B"},
		{"10.10.10.[c:a]", ""},
		{"10.10.10.[a:c:0]", ""},
		{"10.10.10.[a:c:-1]", "-"},
		{"10.10.10.[a:c:2]", "10.10.10.a 10.10.10.c"},
		{"10.10.10.[a:5]", ""},
		{"10.10.10.[+1:3]", "10.10.10.1 10.10.10.2 10.10.10.3"},
		{"10.10.10.[-1:1]", "10.10.10.-1 10.10.10.0 10.10.10.1"},
		{"10.10.10.[-01:01]", "10.10.10.-1 10.10.10.0 10.10.10.1"},
		{"a]b[1:2]", ""},
		{"x|[1:2]", ""},
		{"10.10.10.[1:2:3:4]", ""},
		{"10.10.10.[1:2]x[3:4]", "10.10.10.1x3 10.10.10.1x4 10.10.10.2x3 10.10.10.2x4"},
		{"10.10.10.[1:3: 2]", "10.10.10.1 10.10.10.3"},
		{"10.10.10.[1__1:13]", ""},
		{"10.10.10.[11:13:a]", ""},
		{"10.10.10.11", "10.10.10.11"},
	} {
		got, _, err := expandHostPattern(c.key)
		switch {
		case c.want == "" && err == nil:
			t.Errorf("%s: Barn expands it to %v; Ansible fails on it", c.key, got)
		case c.want != "" && err != nil:
			t.Errorf("%s: Barn fails (%v); Ansible reads %s", c.key, err, c.want)
		case c.want == "-" && len(got) != 0:
			t.Errorf("%s: Barn expands it to %v; Ansible to no host", c.key, got)
		case c.want != "" && c.want != "-" && !reflect.DeepEqual(got, strings.Fields(c.want)):
			t.Errorf("%s: Barn expands it to %v; Ansible to %s", c.key, got, c.want)
		}
	}
	// Ansible's parse_address splits off a :PORT after an address or host
	// name, and keeps it in the name otherwise.
	for key, want := range map[string]string{"10.10.10.11:22": "10.10.10.11 :22", "10.10.10.[1:3]:22": "10.10.10.1 10.10.10.2 10.10.10.3 :22",
		"[10.10.10.11]:22": "10.10.10.11 :22", "a b:22": "a b:22 :", "10.10.10.11": "10.10.10.11 :"} {
		names, port, err := expandHostPattern(key)
		if got := strings.Join(names, " ") + " :" + port; err != nil || got != want {
			t.Errorf("%s: %s %v; Ansible reads %s", key, got, err, want)
		}
	}
}
