package hostnet

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"barn.dev/lib/exitcode"
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

// BARN_BRIDGE names the table and BARN_NET_STATE the record: a fault
// command whose two disagree is refused before anything is recorded or
// enforced (found by review: barn0's record written into barn1's table,
// whose rules then outlived barn0's heal).
func TestFaultBridgeMustMatchStateDir(t *testing.T) {
	f := newFakeHost(t, true, "inactive")
	if _, err := f.install(t, Options{}); err != nil {
		t.Fatal(err)
	}
	withFaultFakes(t, f)
	ctx := context.Background()
	f.Bridge = "barn1"
	_, err := f.AddFault(ctx, FaultRequest{Kind: FaultIsolate, A: []Member{{"pg-2", "10.10.10.12"}}}, time.Now())
	if e := exitcode.As(err); e.Reason != "fault_bridge_mismatch" || !strings.Contains(e.Next, "BARN_BRIDGE=barn0 ") {
		t.Fatalf("AddFault with BARN_BRIDGE=barn1 on barn0's state: %v", err)
	}
	if r, _ := f.ReadFaults(); len(r.Faults) != 0 {
		t.Fatalf("a refused fault was recorded: %+v", r.Faults)
	}
	f.Bridge = "barn0"
	fl, err := f.AddFault(ctx, FaultRequest{Kind: FaultIsolate, A: []Member{{"pg-2", "10.10.10.12"}}}, time.Now())
	must(t, err)
	f.Bridge = "barn1"
	if _, err := f.HealFaults(ctx, nil, true); exitcode.As(err).Reason != "fault_bridge_mismatch" {
		t.Fatalf("heal --all with BARN_BRIDGE=barn1 of barn0's fault: %v", err)
	}
	f.Bridge = "barn0"
	if healed, err := f.HealFaults(ctx, nil, true); err != nil || len(healed) != 1 || healed[0].ID != fl.ID {
		t.Fatalf("heal --all: %v %v", healed, err)
	}
}
