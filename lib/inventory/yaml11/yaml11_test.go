package yaml11

import (
	"math"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The expectations are PyYAML's (SafeLoader), as Ansible reads them.
func TestResolvePlain(t *testing.T) {
	cases := []struct {
		in   string
		kind Kind
		val  any
	}{
		{"08", Str, "08"}, {"010", Int, int64(8)}, {"0o10", Str, "0o10"}, {"1:30", Int, int64(90)},
		{"2.0", Float, 2.0}, {"yes", Bool, true}, {"on", Bool, true}, {"Off", Bool, false},
		{"~", Null, nil}, {"1_000", Int, int64(1000)}, {"0x1F", Int, int64(31)}, {"8192", Int, int64(8192)},
		{"1e3", Str, "1e3"}, {"12.1", Float, 12.1}, {"+5", Int, int64(5)}, {"0b101", Int, int64(5)},
		{"1.", Float, 1.0}, {"190:20:30", Int, int64(685230)}, {"2001-01-01", Timestamp, "2001-01-01"},
		{"y", Str, "y"}, {"8G", Str, "8G"},
	}
	for _, c := range cases {
		var n yaml.Node
		if err := yaml.Unmarshal([]byte("v: "+c.in), &n); err != nil {
			t.Fatal(err)
		}
		s := Resolve(n.Content[0].Content[1])
		if s.Kind != c.kind || s.Value() != c.val {
			t.Errorf("%q: got %s %v, want %s %v", c.in, s.Kind, s.Value(), c.kind, c.val)
		}
	}
}

func TestCanonical(t *testing.T) {
	for in, want := range map[string]bool{"8": true, "08": false, "010": false, "1_0": false, "+5": false, "12.1": true, "12.10": false, "12.0": true} {
		var n yaml.Node
		_ = yaml.Unmarshal([]byte("v: "+in), &n)
		s := Resolve(n.Content[0].Content[1])
		if s.Kind != Str && s.Canonical() != want {
			t.Errorf("%q canonical = %v, want %v", in, s.Canonical(), want)
		}
	}
}

// TestParseIntIsPyYAMLs: PyYAML's construct_yaml_int through Python's
// int(), for explicit !!int values (each row checked with Python 3.11).
func TestParseIntIsPyYAMLs(t *testing.T) {
	for v, want := range map[string]int64{" 12": 12, "0o17": 15, "017": 15, "0x1F": 31, "0b101": 5, "1_000": 1000, "-+5": -5, "--5": 5, "1:30": 90, "+0": 0} {
		if got, _, ok := ParseInt(v); !ok || got != want {
			t.Errorf("ParseInt(%q) = %d, %v; PyYAML %d", v, got, ok, want)
		}
	}
	for _, v := range []string{"", "abc", "08", "1.5", "0b_", "0x", "01:30", "+", "1 2"} {
		if got, _, ok := ParseInt(v); ok {
			t.Errorf("ParseInt(%q) = %d; PyYAML fails", v, got)
		}
	}
	for v, want := range map[string]float64{"1": 1, " 1.5 ": 1.5, "1e3": 1000, ".5": 0.5, "1.": 1, "1:30.5": 90.5, "-.inf": math.Inf(-1)} {
		if got, ok := ParseFloat(v); !ok || got != want {
			t.Errorf("ParseFloat(%q) = %v, %v; PyYAML %v", v, got, ok, want)
		}
	}
	for _, v := range []string{"", "abc", "0x1p3", "1e", "+"} {
		if got, ok := ParseFloat(v); ok {
			t.Errorf("ParseFloat(%q) = %v; PyYAML fails", v, got)
		}
	}
}
