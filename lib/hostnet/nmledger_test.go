package hostnet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"barn.dev/lib/exitcode"
)

// addRejected makes `nmcli connection add` fail as NetworkManager refuses
// an add (exit 2, not libnm's "Timeout was reached"): nothing was added and
// nothing ever will be.
type addRejected struct{ Runner }

func (r addRejected) Run(ctx context.Context, argv []string) ([]byte, error) {
	if len(argv) > 2 && argv[0] == "nmcli" && argv[1] == "connection" && argv[2] == "add" {
		return []byte("Error: Failed to add 'barn0' connection: connection.interface-name: 'barn0': interface name is in use"), errors.New("exit status 2")
	}
	return r.Runner.Run(ctx, argv)
}

// freshStateDir points f at a state directory Barn has to create (as
// /var/lib/barn on a host Barn never ran on), so releasing it is visible.
func (f *fakeHost) freshStateDir() { f.StateDir = filepath.Join(f.root, "var", "lib", "barn") }

func (f *fakeHost) wantNoLedgerNoStateDir(t *testing.T, when string) {
	t.Helper()
	l, _ := f.readLedger()
	if _, err := os.Lstat(f.LedgerPath()); err == nil {
		t.Errorf("%s: the ledger survives: %+v", when, l.Connections)
	}
	if _, err := os.Lstat(f.StateDir); err == nil {
		t.Errorf("%s: the state dir %s is never released (holds %s)", when, f.StateDir, readDirNames(t, f.StateDir))
	}
}

// TestNMLedgerForgetsARejectedAdd: an add NetworkManager refused (not
// libnm's timeout) and does not list can never be added late, so its UUID
// leaves the ledger at once; a later clean install+uninstall leaves
// neither the ledger nor the state directory (review of the ledger, R1).
func TestNMLedgerForgetsARejectedAdd(t *testing.T) {
	for _, how := range []string{"add-rejected"} {
		t.Run(how, func(t *testing.T) {
			f := newFakeHost(t, true, "inactive")
			f.freshStateDir()
			switch how {
			case "add-rejected":
				f.Runner = addRejected{f.Runner}
				if _, err := f.install(t, Options{}); err == nil || !strings.Contains(err.Error(), "rolled back") {
					t.Fatalf("install: want a rollback, got %v", err)
				}
				f.Runner = f.Runner.(addRejected).Runner
			}
			if _, err := f.install(t, Options{}); err != nil {
				t.Fatal(err)
			}
			p, err := f.Uninstall(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if notesContain(p, "never saw NetworkManager add") {
				t.Errorf("a clean uninstall still notes the dead entry: %q", p.Notes)
			}
			f.wantNoLedgerNoStateDir(t, "after a later clean install+uninstall")
		})
	}
}

// TestNMLedgerForgetsWhatIsGone (review R2): (a) uninstall kept Barn's
// connection (the user renamed it), so Barn no longer claims it and its
// UUID leaves the ledger; (b) a late-added leftover planned for removal is
// gone by the time its step runs: its UUID leaves too. A later clean
// install+uninstall leaves neither ledger nor state directory.
func TestNMLedgerForgetsWhatIsGone(t *testing.T) {
	t.Run("kept-then-deleted", func(t *testing.T) {
		f := newFakeHost(t, true, "inactive")
		f.freshStateDir()
		if _, err := f.install(t, Options{}); err != nil {
			t.Fatal(err)
		}
		x := f.barnUUID(t)
		// nmcli connection modify uuid X connection.id mylab
		f.fakeFile(t, "nm-connections", wiredUUID+":802-3-ethernet:Wired connection 1\n"+x+":bridge:mylab\n")
		p, err := f.Uninstall(context.Background(), nil)
		if err != nil || !notesContain(p, "kept:") {
			t.Fatalf("uninstall with Barn's connection renamed: %v %q", err, p.Notes)
		}
		// the user deletes mylab (and its bridge goes with it)
		f.fakeFile(t, "nm-connections", wiredUUID+":802-3-ethernet:Wired connection 1\n")
		f.fakeFile(t, "nm-active", "")
		must(t, os.Remove(filepath.Join(f.root, "fake", "bridge")))
		if _, err := f.install(t, Options{}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Uninstall(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		f.wantNoLedgerNoStateDir(t, "after Barn's seen connection went and a clean install+uninstall")
	})
	t.Run("leftover-gone-meanwhile", func(t *testing.T) {
		f := newFakeHost(t, true, "inactive")
		f.freshStateDir()
		late := f.lostAdd(t)
		f.markedConn(t, late, "")
		// NetworkManager (or the user) drops it after Apply re-inspected.
		f.CrashAfter = func(phase, step string) {
			if phase == "install" && step == "write-manifest" {
				f.fakeFile(t, "nm-connections", wiredUUID+":802-3-ethernet:Wired connection 1\n")
			}
		}
		if _, err := f.install(t, Options{}); err != nil {
			t.Fatal(err)
		}
		f.CrashAfter = nil
		if _, err := f.Uninstall(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		f.wantNoLedgerNoStateDir(t, "after the planned leftover vanished and a clean install+uninstall")
	})
}

// TestNMUninstallRestoresTheUsersZone (review R4): Barn's own `nmcli
// connection down` makes NetworkManager remove barn0 from its zone (the
// fake's default NetworkManager, as 1.42), also when the binding was the
// user's before install (the recorded prestate); uninstall binds it again.
func TestNMUninstallRestoresTheUsersZone(t *testing.T) {
	f := newFakeHost(t, true, "inactive")
	f.fakeFile(t, "firewalld", "active")
	f.fakeFile(t, "fw-runtime-barn0", "trusted") // the user's runtime binding
	if _, err := f.install(t, Options{}); err != nil {
		t.Fatal(err)
	}
	if m, _ := f.ReadManifest(); m.Prestate.FirewalldZone != "trusted" {
		t.Fatalf("prestate %q", m.Prestate.FirewalldZone)
	}
	if _, err := f.Uninstall(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if !f.fakeExists("fw-runtime-barn0") {
		t.Error("the user's runtime binding of barn0 to trusted (the recorded prestate) is gone after uninstall")
	}
}

// TestNMLedgerConcurrentRecords (review R5): two barn-net processes
// recording at once lose none of each other's UUIDs (the state directory's
// flock).
func TestNMLedgerConcurrentRecords(t *testing.T) {
	root := t.TempDir()
	mk := func() *Host { return &Host{StateDir: filepath.Join(root, "state"), Bridge: "barn0"} }
	a, b := mk(), mk()
	var wg sync.WaitGroup
	for i, h := range []*Host{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				_ = h.ledgerRecord(fmt.Sprintf("00000000-0000-4000-8000-%012d", i*100+j), "barn0")
			}
		}()
	}
	wg.Wait()
	l, err := a.readLedger()
	must(t, err)
	if len(l.Connections) != 40 {
		t.Errorf("the ledger holds %d of 40 recorded UUIDs", len(l.Connections))
	}
}

// TestNMLedgerRefusesSymlinkAndMode: a ledger that is a symlink, or not
// 0600, is integrity, never read.
func TestNMLedgerRefusesSymlinkAndMode(t *testing.T) {
	f := newFakeHost(t, true, "inactive")
	must(t, os.MkdirAll(f.StateDir, 0o755))
	good := filepath.Join(f.root, "elsewhere.json")
	must(t, os.WriteFile(good, []byte(`{"schema":"barn.net.nm-uuids/v1","connections":[]}`), 0o600))
	must(t, os.Symlink(good, f.LedgerPath()))
	if _, err := f.Inspect(context.Background()); exitcode.ClassOf(err) != exitcode.Integrity {
		t.Errorf("symlinked ledger: %v", err)
	}
	must(t, os.Remove(f.LedgerPath()))
	must(t, os.WriteFile(f.LedgerPath(), []byte(`{"schema":"barn.net.nm-uuids/v1","connections":[]}`), 0o644))
	if _, err := f.Inspect(context.Background()); exitcode.ClassOf(err) != exitcode.Integrity {
		t.Errorf("0644 ledger: %v", err)
	}
}

// TestNMUninstallNamesAProvenLeftover (review R7): uninstall with no
// manifest while a leftover the ledger proves Barn's is listed (active,
// holding 10.10.10.1/24) notes it and says the next install removes it.
func TestNMUninstallNamesAProvenLeftover(t *testing.T) {
	f := newFakeHost(t, true, "inactive")
	late := f.lostAdd(t)
	f.markedConn(t, late, "")
	f.fakeFile(t, "nm-active", late+"\n")
	f.fakeFile(t, "bridge", "")
	p, err := f.Uninstall(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !notesContain(p, late) {
		t.Errorf("uninstall is silent about Barn's own leftover %s: noop %v, notes %q", late, p.Noop, p.Notes)
	}
}

// lateLeftover leaves the ledger with one unseen UUID whose connection
// NetworkManager then added (active, zoned trusted, bound): Barn's leftover.
func (f *fakeHost) lateLeftover(t *testing.T) string {
	t.Helper()
	late := f.lostAdd(t)
	f.markedConn(t, late, "trusted")
	must(t, f.command(context.Background(), "nmcli", "connection", "up", "uuid", late))
	return late
}

// TestNMRollbackAtEveryStepWithLeftover: a rollback at any step after the
// leftover step leaves no leftover, no ledger, no binding, no state dir.
func TestNMRollbackAtEveryStepWithLeftover(t *testing.T) {
	probe := newFakeHost(t, true, "inactive")
	probe.lateLeftover(t)
	o, err := probe.Inspect(context.Background())
	must(t, err)
	p, err := probe.PlanInstall(o, Options{})
	must(t, err)
	for _, s := range p.Steps[1:] { // a failure at write-manifest rightly keeps the leftover and its entry
		t.Run(s.ID, func(t *testing.T) {
			f := newFakeHost(t, true, "inactive")
			f.freshStateDir()
			f.lateLeftover(t)
			o, err := f.Inspect(context.Background())
			must(t, err)
			p, err := f.PlanInstall(o, Options{})
			must(t, err)
			f.FailAfter = p.Steps[len(p.Steps)-1].ID
			for _, s2 := range p.Steps {
				if strings.HasPrefix(s2.ID, strings.SplitN(s.ID, "-", 2)[0]) && s2.Kind == s.Kind {
					f.FailAfter = s2.ID
				}
			}
			if _, err := f.Apply(context.Background(), p, Options{}, nil); err == nil || !strings.Contains(err.Error(), "rolled back") {
				t.Fatalf("want a rollback: %v", err)
			}
			if f.fakeExists("fw-runtime-barn0") || f.fakeExists("bridge") {
				t.Errorf("binding %v bridge %v", f.fakeExists("fw-runtime-barn0"), f.fakeExists("bridge"))
			}
			f.wantNoLedgerNoStateDir(t, "after rollback at "+s.ID)
		})
	}
}

// TestNMLedgerIgnoresUUIDCase: a ledger UUID in upper case still proves
// (and settles) NetworkManager's lower-case one.
func TestNMLedgerIgnoresUUIDCase(t *testing.T) {
	for _, c := range []string{"upper"} {
		t.Run(c, func(t *testing.T) {
			f := newFakeHost(t, true, "inactive")
			late := f.lateLeftover(t)
			l, _ := f.readLedger()
			l.Connections[0].UUID = strings.ToUpper(late)
			must(t, f.updateLedger(func(x *Ledger) { *x = l }))
			if _, err := f.install(t, Options{}); err != nil {
				t.Fatalf("%s: %v", c, err)
			}
			if b, _ := os.ReadFile(filepath.Join(f.root, "fake", "nm-connections")); strings.Contains(string(b), late) {
				t.Errorf("%s: leftover kept", c)
			}
			if _, err := f.Uninstall(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(f.LedgerPath()); err == nil {
				t.Errorf("%s: ledger left", c)
			}
		})
	}
}

// TestNMKeptConnectionIsNotClaimed (review R8): uninstall keeps Barn's
// connection once the user changed it ("kept: ... not the one Barn
// added"), and its UUID leaves the ledger, so when the user names it barn0
// again, or adds their own with that UUID, the next install refuses it
// (bridge_foreign) and keeps it.
func TestNMKeptConnectionIsNotClaimed(t *testing.T) {
	for _, how := range []string{"renamed-back", "uuid-reused"} {
		t.Run(how, func(t *testing.T) {
			f := newFakeHost(t, true, "inactive")
			if _, err := f.install(t, Options{}); err != nil {
				t.Fatal(err)
			}
			x := f.barnUUID(t)
			f.fakeFile(t, "nm-connections", wiredUUID+":802-3-ethernet:Wired connection 1\n"+x+":bridge:mylab\n")
			p, err := f.Uninstall(context.Background(), nil)
			if err != nil || !notesContain(p, "kept:", "not the one Barn added") {
				t.Fatalf("uninstall: %v %q", err, p.Notes)
			}
			if how == "uuid-reused" { // deleted, then the user's own with that UUID
				f.fakeFile(t, "nm-connections", wiredUUID+":802-3-ethernet:Wired connection 1\n")
				f.fakeFile(t, "nm-active", "")
			}
			f.fakeFile(t, "nm-connections", wiredUUID+":802-3-ethernet:Wired connection 1\n"+x+":bridge:barn0\n")
			f.fakeFile(t, "nm-active", "")
			if _, err := f.install(t, Options{}); reason(err) != "bridge_foreign" {
				t.Errorf("install over the connection uninstall kept as not Barn's: %v", err)
			}
			if b, _ := os.ReadFile(filepath.Join(f.root, "fake", "nm-connections")); !strings.Contains(string(b), x+":bridge:barn0") {
				t.Errorf("the kept connection %s was deleted by install", x)
			}
		})
	}
}

// TestNMLeftoverOfAnotherSubnetIsNamed (review R9): a leftover of Barn's
// (its UUID recorded) made for another /24 is refused as bridge_foreign,
// saying Barn added it for another /24.
func TestNMLeftoverOfAnotherSubnetIsNamed(t *testing.T) {
	f := newFakeHost(t, true, "inactive")
	late := f.lateLeftover(t)
	must(t, f.command(context.Background(), "nmcli", "connection", "down", "uuid", late)) // inactive, no link
	_, err := f.install(t, Options{CIDR: "10.10.20.0/24"})
	if reason(err) != "bridge_foreign" || !strings.Contains(err.Error(), "Barn added it") || !strings.Contains(err.Error(), "not for 10.10.20.0/24") {
		t.Errorf("install --cidr 10.10.20.0/24 over Barn's leftover %s for 10.10.10.0/24: %v", late, err)
	}
}

// TestNMKillBeforeAddKeepsTheUUIDAndSaysSo: install killed between the
// ledger record and nmcli connection add (the live host-under-test's late
// add starts here): the uninstall that follows keeps the unseen UUID and
// says so in a note, though it is the manifest's own (its add never counted
// as applied); once NetworkManager adds that UUID, the next install removes
// it first.
func TestNMKillBeforeAddKeepsTheUUIDAndSaysSo(t *testing.T) {
	f := newFakeHost(t, true, "inactive")
	if !f.withCrash("install", "nm-uuid-recorded", func() { _, _ = f.install(t, Options{}) }) {
		t.Fatal("crash point not reached")
	}
	u := f.barnUUID(t)
	p, err := f.Uninstall(context.Background(), nil)
	if err != nil || !notesContain(p, "kept: "+f.LedgerPath()+" records the connection "+u) {
		t.Fatalf("uninstall after the kill: %v, notes %q", err, p.Notes)
	}
	if l, err := f.readLedger(); err != nil || !l.Has(u) {
		t.Fatalf("the ledger lost %s: %+v %v", u, l, err)
	}
	f.fakeFile(t, "nm-connections", wiredUUID+":802-3-ethernet:Wired connection 1\n"+u+":bridge:barn0\n")
	f.fakeFile(t, "nm-mac-"+u, BridgeMAC("barn0", mustSubnet(DefaultCIDR)))
	f.fakeFile(t, "nm-zone-"+u, "")
	o, err := f.Inspect(context.Background())
	must(t, err)
	if pl, err := f.PlanInstall(o, Options{}); err != nil || pl.Steps[1].Kind != KindNMLeftover || pl.Steps[1].UUID != u {
		t.Fatalf("install after the late add of %s: %v %+v", u, err, pl.Steps)
	}
}

// markedConn makes the fake list connection uuid as NetworkManager would
// after a late add of Barn's: barn0, type bridge, Barn's mark for the
// default /24, zone (or none), beside the wired connection; not active.
func (f *fakeHost) markedConn(t *testing.T, uuid, zone string) {
	t.Helper()
	f.fakeFile(t, "nm-connections", wiredUUID+":802-3-ethernet:Wired connection 1\n"+uuid+":bridge:barn0\n")
	f.fakeFile(t, "nm-mac-"+uuid, BridgeMAC("barn0", mustSubnet(DefaultCIDR)))
	f.fakeFile(t, "nm-zone-"+uuid, zone)
}
