package inventory

import (
	"net/netip"
	"testing"
)

// Golden values: changing any of them changes every spec hash.
func TestDerivedIdentities(t *testing.T) {
	m, p := MACs(netip.MustParseAddr("10.10.10.11"))
	if m != "0a:ba:01:0a:0a:0b" || p != "0a:ba:02:0a:0a:0b" {
		t.Errorf("MACs = %s %s", m, p)
	}
	if got := DiskSerial("pg-test-1", "data"); got != "bhvnd4k7pm4vlgnjdefp" {
		t.Errorf("DiskSerial = %s", got)
	}
	if got := ShareTag("/srv/out", "/out", false); got != "barn-8daac610908f5fc61037" {
		t.Errorf("ShareTag = %s", got)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]string{"8G": "write 8GiB", "1.5GiB": "write 1536MiB", "8gib": "write 8GiB", "8192": "write 8192 without quotes or with a unit, e.g. 8192MiB"} {
		if _, hint, err := ParseSize(in); err == nil || hint != want {
			t.Errorf("ParseSize(%q) hint %q err %v, want hint %q", in, hint, err, want)
		}
	}
	if b, _, err := ParseSize("8GiB"); err != nil || b != 8<<30 {
		t.Errorf("8GiB = %d %v", b, err)
	}
	if b, _, err := ParseSize("2GB"); err != nil || b != 2e9 {
		t.Errorf("2GB = %d %v", b, err)
	}
}

func TestTemplatesResolve(t *testing.T) {
	for i, name := range TemplateNames {
		data, err := Template(name, DefaultCIDR)
		if err != nil {
			t.Fatal(err)
		}
		s, _, err := Resolve(data, name+".yml")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(s.Nodes) != i+1 || s.Control != "pg-meta-1" || s.Nodes[0].Address != "10.10.10.10" {
			t.Errorf("%s: %d nodes, control %s", name, len(s.Nodes), s.Control)
		}
	}
}
