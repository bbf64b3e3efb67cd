package hostnet

import (
	"context"
	"os"
	"strings"
	"testing"
)

// tablesNft is one namespace's nftables as the fault code drives it (`nft
// list table bridge T`, `nft -f FILE`): every table by name, each script
// applied whole.
type tablesNft map[string]string

func (k tablesNft) Run(_ context.Context, argv []string) ([]byte, error) {
	switch {
	case len(argv) == 5 && argv[1] == "list":
		if t, ok := k[argv[4]]; ok {
			return []byte(t), nil
		}
		return []byte("Error: No such file or directory"), os.ErrNotExist
	case len(argv) == 3 && argv[1] == "-f":
		b, err := os.ReadFile(argv[2])
		if err != nil {
			return nil, err
		}
		for _, l := range strings.Split(string(b), "\n") {
			if name, ok := strings.CutPrefix(l, "delete table bridge "); ok {
				delete(k, name)
			}
			if name, ok := strings.CutPrefix(l, "table bridge "); ok && strings.HasSuffix(name, " {") {
				name = strings.TrimSuffix(name, " {")
				k[name] = string(b[strings.Index(string(b), l):]) + "\n# comment \"" + faultComment + "\""
			}
		}
		return nil, nil
	}
	return nil, nil
}

// Two Barn networks in one namespace (README: a second network) each
// rewrite only their own table: a fault on barn1 leaves barn0's rules.
func TestFaultTablePerBridge(t *testing.T) {
	ctx := context.Background()
	k := tablesNft{}
	h0 := &Host{StateDir: t.TempDir(), Bridge: "barn0", Runner: k}
	h1 := &Host{StateDir: t.TempDir(), Bridge: "barn1", Runner: k}
	f0 := Fault{ID: "f1", Kind: FaultIsolate, State: FaultActive, A: []Member{{"pg-1", "10.10.10.11"}}, Bridge: "barn0"}
	f1 := Fault{ID: "f1", Kind: FaultPartition, State: FaultActive, A: []Member{{"x-1", "10.10.20.11"}}, B: []Member{{"x-2", "10.10.20.12"}}, Bridge: "barn1"}
	must(t, h0.syncFaultTable(ctx, []Fault{f0}))
	must(t, h1.syncFaultTable(ctx, []Fault{f1}))
	if !strings.Contains(k["barn_faults_barn0"], "10.10.10.11") || !strings.Contains(k["barn_faults_barn1"], "10.10.20.12") {
		t.Fatalf("tables after a fault on each network: %q", k)
	}
	must(t, h1.syncFaultTable(ctx, nil)) // barn1's heal --all
	if _, ok := k["barn_faults_barn1"]; ok || !strings.Contains(k["barn_faults_barn0"], "10.10.10.11") {
		t.Fatalf("tables after barn1's heal: %q", k)
	}
}

// FaultTable is an nft identifier for any bridge name, and two bridge
// names never share a table.
func TestFaultTableName(t *testing.T) {
	seen := map[string]string{}
	for _, br := range []string{"barn0", "barn-0", "barn_0", "barn_2d0", "br.lab", "Barn0", "x/y", "b\\c"} {
		name := FaultTable(br)
		for _, c := range name {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
				t.Errorf("FaultTable(%q) = %q: %q is not an identifier character", br, name, c)
			}
		}
		if other, dup := seen[name]; dup {
			t.Errorf("bridges %q and %q share table %q", other, br, name)
		}
		seen[name] = br
	}
	if got := FaultTable("barn0"); got != "barn_faults_barn0" {
		t.Errorf("FaultTable(barn0) = %q", got)
	}
}
