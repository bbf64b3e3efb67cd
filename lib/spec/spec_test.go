package spec

import (
	"reflect"
	"strings"
	"testing"

	"barn.dev/lib/wire"
)

// Sources is a JSON list of file names. The single string development
// builds wrote (before Barn read group_vars/host_vars) is refused, as is
// any other type.
func TestSourcesDecodeAList(t *testing.T) {
	for doc, want := range map[string]Sources{
		`{"source":["pigsty.yml","group_vars/all.yml"]}`: {"pigsty.yml", "group_vars/all.yml"},
		`{"source":null}`: nil,
		`{}`:              nil,
	} {
		var s struct {
			Source Sources `json:"source"`
		}
		if err := wire.DecodeStrict([]byte(doc), &s); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		if !reflect.DeepEqual(s.Source, want) {
			t.Errorf("%s: got %#v, want %#v", doc, s.Source, want)
		}
	}
	for _, doc := range []string{`{"source":"pigsty.yml"}`, `{"source":7}`} {
		var s struct {
			Source Sources `json:"source"`
		}
		if err := wire.DecodeStrict([]byte(doc), &s); err == nil {
			t.Errorf("%s decoded as sources %#v", doc, s.Source)
		}
	}
	b, err := wire.Marshal(Spec{Source: Sources{"pigsty.yml"}})
	if err != nil || !strings.Contains(string(b), `"source":["pigsty.yml"]`) {
		t.Errorf("marshal: %s %v", b, err)
	}
}

// FQDN is omitted when empty, so a node without one hashes exactly as
// before the field existed; setting it moves that node's hash only.
func TestFQDNIsOmittedAndHashed(t *testing.T) {
	d := Deployment{Name: DeploymentName, Arch: "native", Subnet: Subnet{CIDR: "10.10.10.0/24"}, User: User{Name: "dba", UID: 88}}
	n := Node{Name: "pigsty", Address: "10.10.10.10", Disks: []Disk{}, Aliases: []string{}, Shares: []Share{}}
	b, err := wire.Marshal(n)
	if err != nil || strings.Contains(string(b), "fqdn") {
		t.Fatalf("node without FQDN: %s %v", b, err)
	}
	// Node as it was before FQDN existed hashes to the same value.
	type oldNode struct {
		Name          string   `json:"name"`
		Address       string   `json:"address"`
		Control       bool     `json:"control"`
		MAC           NICs     `json:"mac"`
		Image         string   `json:"image"`
		CPUs          int      `json:"cpus"`
		MemoryBytes   int64    `json:"memory_bytes"`
		RootDiskBytes int64    `json:"root_disk_bytes"`
		Disks         []Disk   `json:"disks"`
		Aliases       []string `json:"aliases"`
		Shares        []Share  `json:"shares"`
		SpecHash      string   `json:"spec_hash"`
	}
	old := wire.MustHash(struct {
		Deployment Deployment `json:"deployment"`
		Node       oldNode    `json:"node"`
	}{d, oldNode{Name: n.Name, Address: n.Address, Disks: n.Disks, Aliases: n.Aliases, Shares: n.Shares}})
	if got := NodeHash(d, n); got != old {
		t.Errorf("node hash moved: %s, was %s", got, old)
	}
	withFQDN := n
	withFQDN.FQDN = "pigsty.cc"
	if NodeHash(d, withFQDN) == NodeHash(d, n) {
		t.Error("the FQDN does not enter the node hash")
	}
}
