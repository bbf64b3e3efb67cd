package lifecycle

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/hostnet"
	"barn.dev/lib/spec"
	"barn.dev/lib/state"
)

type bridgeEmu struct{ Emulator }

func (bridgeEmu) PrivateNet() string { return "bridge" }

type faultsNet struct {
	faults []hostnet.Fault
	err    error
}

func (faultsNet) Preflight(context.Context, string) error { return nil }
func (faultsNet) CheckAddress(context.Context, spec.Node) (string, func(), error) {
	return "", func() {}, nil
}
func (n faultsNet) Faults() ([]hostnet.Fault, error) { return n.faults, n.err }

// Status shows barn-net's recorded faults with their age, and on each
// node's row the IDs of the faults acting on its address.
func TestStatusShowsRecordedNetFaults(t *testing.T) {
	now := time.Date(2026, 12, 2, 20, 0, 0, 0, time.UTC)
	meta, pg := hostnet.Member{Name: "meta", Address: "10.10.10.10"}, hostnet.Member{Name: "pg-test-1", Address: "10.10.10.11"}
	net := faultsNet{faults: []hostnet.Fault{
		{ID: "f1", Kind: hostnet.FaultPartition, State: hostnet.FaultActive, A: []hostnet.Member{meta}, B: []hostnet.Member{pg}, Created: now.Add(-90 * time.Second)},
		{ID: "f2", Kind: hostnet.FaultIsolate, State: hostnet.FaultHealing, A: []hostnet.Member{pg}, Created: now.Add(-5 * time.Second)},
	}}
	m := &Manager{Emu: bridgeEmu{}, Net: net}
	st := &Status{CheckedAt: now, Nodes: []NodeStatus{{Name: "meta", Address: "10.10.10.10"}, {Name: "pg-test-1", Address: "10.10.10.11"}, {Name: "off"}}}
	m.addNetFaults(st)
	want := []NetFault{
		{ID: "f1", Kind: "partition", Description: "partition meta <-> pg-test-1", State: "active", Addresses: []string{"10.10.10.10", "10.10.10.11"}, CreatedAt: now.Add(-90 * time.Second), AgeSeconds: 90},
		{ID: "f2", Kind: "isolate", Description: "isolate pg-test-1", State: "healing", Addresses: []string{"10.10.10.11"}, CreatedAt: now.Add(-5 * time.Second), AgeSeconds: 5},
	}
	if !reflect.DeepEqual(st.NetFaults, want) {
		t.Fatalf("net faults %+v\nwant %+v", st.NetFaults, want)
	}
	for i, ids := range [][]string{{"f1"}, {"f1", "f2"}, {}} {
		if !reflect.DeepEqual(st.Nodes[i].NetFaults, ids) {
			t.Errorf("%s: net faults %v, want %v", st.Nodes[i].Name, st.Nodes[i].NetFaults, ids)
		}
	}
	var b bytes.Buffer
	st.renderNetFaults(&b)
	if got := b.String(); !strings.Contains(got, "network fault f1: partition meta <-> pg-test-1, active, age 1m30s\n") ||
		!strings.Contains(got, "network fault f2: isolate pg-test-1, healing, age 5s\n") || !strings.Contains(got, "sudo barn-net fault list") {
		t.Fatalf("text:\n%s", got)
	}
}

// A record that cannot be read is said so, never shown as "no fault"; the
// test-only profile without a private network reads nothing.
func TestStatusNetFaultsUnreadableOrNoPrivateNet(t *testing.T) {
	m := &Manager{Emu: bridgeEmu{}, Net: faultsNet{err: exitcode.New(exitcode.Integrity, "fault record x is damaged").WithNext("repair x")}}
	st := &Status{Nodes: []NodeStatus{{Name: "meta", Address: "10.10.10.10"}}}
	m.addNetFaults(st)
	if st.NetFaults != nil || st.Nodes[0].NetFaults != nil || st.NetFaultsProblem != "fault record x is damaged (next: repair x)" {
		t.Fatalf("unreadable record: %+v", st)
	}
	m = &Manager{Net: faultsNet{err: errors.New("must not be read")}}
	st = &Status{}
	m.addNetFaults(st)
	if st.NetFaultsProblem != "" || st.NetFaults != nil {
		t.Fatalf("without a private network: %+v", st)
	}
}

// The real record is read as barn-net writes it (root-owned or this
// user's, 0644) and filtered to the profile's bridge; another mode is
// integrity, not "no fault".
func TestRecordedFaultsReadsBarnNetRecord(t *testing.T) {
	dir := t.TempDir()
	h := &hostnet.Host{StateDir: dir}
	if f, err := recordedFaults(h, "barn0"); err != nil || len(f) != 0 {
		t.Fatalf("no record: %v %v", f, err)
	}
	rec := `{"schema":"barn.net.faults/v1","next":3,"faults":[
	 {"id":"f1","kind":"isolate","state":"active","a":[{"name":"m","address":"10.10.10.10"}],"bridge":"barn0","created":"2026-12-02T20:00:00Z"},
	 {"id":"f2","kind":"isolate","state":"active","a":[{"name":"m","address":"10.10.10.10"}],"bridge":"barn1","created":"2026-12-02T20:00:00Z"}]}`
	p := filepath.Join(dir, "faults.json")
	if err := os.WriteFile(p, []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := recordedFaults(h, "barn0")
	if err != nil || len(f) != 1 || f[0].ID != "f1" {
		t.Fatalf("record on barn0: %+v %v", f, err)
	}
	if err := os.Chmod(p, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := recordedFaults(h, "barn0"); exitcode.ClassOf(err) != exitcode.Integrity {
		t.Fatalf("a world-writable record: %v", err)
	}
}

// Destroy cannot heal a fault (barn-net's, root's): it names each one that
// still acts on a destroyed node's address, with the command that heals
// it, and says so when the record cannot be read.
func TestDestroyNamesFaultsOnDestroyedAddresses(t *testing.T) {
	meta, pg := hostnet.Member{Name: "meta", Address: "10.10.10.10"}, hostnet.Member{Name: "pg-test-1", Address: "10.10.10.11"}
	d := &state.Deployment{Spec: spec.Spec{Nodes: []spec.Node{{Name: "meta", Address: meta.Address}, {Name: "pg-test-1", Address: pg.Address}}}}
	net := faultsNet{faults: []hostnet.Fault{
		{ID: "f1", Kind: hostnet.FaultPartition, A: []hostnet.Member{meta}, B: []hostnet.Member{pg}},
		{ID: "f2", Kind: hostnet.FaultIsolate, A: []hostnet.Member{meta}},
		{ID: "f3", Kind: hostnet.FaultDegrade, A: []hostnet.Member{pg}, Netem: &hostnet.Netem{DelayUS: 200000}},
	}}
	res := &Result{}
	(&Manager{Emu: bridgeEmu{}, Net: net}).faultNotes(d, map[string]bool{"pg-test-1": true}, res)
	want := []string{"network fault f1 (partition meta <-> pg-test-1) still acts on 10.10.10.11, destroyed pg-test-1's address, and on a node created there next; heal it: sudo barn-net fault heal f1",
		"network fault f3 (degrade pg-test-1 [delay 200000us]) stays recorded for 10.10.10.11, destroyed pg-test-1's address, though its netem went with the node's tap; remove the record: sudo barn-net fault heal f3"}
	if !slices.Equal(res.Notes, want) {
		t.Fatalf("notes = %q, want %q", res.Notes, want)
	}
	res = &Result{}
	(&Manager{Emu: bridgeEmu{}, Net: faultsNet{err: exitcode.New(exitcode.Integrity, "fault record x is damaged")}}).faultNotes(d, map[string]bool{"meta": true}, res)
	if !slices.Equal(res.Notes, []string{"network faults unknown: fault record x is damaged"}) {
		t.Fatalf("unreadable record: %q", res.Notes)
	}
	res = &Result{}
	(&Manager{Net: faultsNet{err: errors.New("must not be read")}}).faultNotes(d, map[string]bool{"meta": true}, res)
	if len(res.Notes) != 0 {
		t.Fatalf("without a private network: %q", res.Notes)
	}
}
