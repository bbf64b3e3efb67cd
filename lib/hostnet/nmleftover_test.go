package hostnet

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"barn.dev/lib/exitcode"
)

// The NetworkManager leaks review found (README "Host-under-test
// findings"): each leaves barn0 or a connection of Barn's that the old code
// had nothing to judge by once its manifest stopped counting it. The bridge
// now carries Barn's mark (bridge.mac-address = BridgeMAC), so uninstall
// and the next install recognise and remove what is left; a barn0 with
// another MAC stays foreign.

// fakeFile writes (or, with content nil, touches) <root>/fake/name.
func (f *fakeHost) fakeFile(t *testing.T, name, content string) {
	t.Helper()
	must(t, os.WriteFile(filepath.Join(f.root, "fake", name), []byte(content), 0o644))
}

// fakeExists reports whether <root>/fake/name exists.
func (f *fakeHost) fakeExists(name string) bool {
	_, err := os.Stat(filepath.Join(f.root, "fake", name))
	return err == nil
}

// barnUUID is the connection UUID the manifest records.
func (f *fakeHost) barnUUID(t *testing.T) string {
	t.Helper()
	m, err := f.ReadManifest()
	must(t, err)
	if m == nil || m.Created.NMConnection == nil {
		t.Fatalf("no NetworkManager connection recorded: %+v", m)
	}
	return m.Created.NMConnection.UUID
}

// wantClean asserts that the host is back as before install: no manifest,
// no barn0 link, no connection of Barn's, no firewalld binding, and a
// fresh install and uninstall pass.
func (f *fakeHost) wantClean(t *testing.T) {
	t.Helper()
	if m, err := f.ReadManifest(); m != nil || err != nil {
		t.Fatalf("manifest left: %+v %v", m, err)
	}
	if f.fakeExists("bridge") {
		t.Fatal("barn0 is left behind")
	}
	if f.fakeExists("fw-runtime-barn0") {
		t.Fatal("firewalld's runtime still binds barn0")
	}
	if b, _ := os.ReadFile(filepath.Join(f.root, "fake", "nm-connections")); strings.Contains(string(b), ":bridge:barn0") {
		t.Fatalf("a barn0 connection is left: %q", b)
	}
	if _, err := f.install(t, Options{}); err != nil {
		t.Fatalf("the next install: %v", err)
	}
	if _, err := f.Uninstall(context.Background(), nil); err != nil {
		t.Fatalf("the next uninstall: %v", err)
	}
}

// TestNMUninstallAfterDeleteTimedOut: nmcli connection delete gave up
// (libnm's 25 s) while NetworkManager deleted the connection, and left the
// bridge. Uninstall fails naming the timeout; the second one finds the
// connection gone and deletes the bridge by its mark.
func TestNMUninstallAfterDeleteTimedOut(t *testing.T) {
	f := newFakeHost(t, true, "inactive")
	if _, err := f.install(t, Options{}); err != nil {
		t.Fatal(err)
	}
	f.fakeFile(t, "nm-link-lingers", "")
	f.fakeFile(t, "nm-delete-timeout", "")
	if _, err := f.Uninstall(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "Timeout was reached") {
		t.Fatalf("uninstall whose delete timed out: %v", err)
	}
	must(t, os.Remove(filepath.Join(f.root, "fake", "nm-delete-timeout")))
	if _, err := f.Uninstall(context.Background(), nil); err != nil {
		t.Fatalf("the second uninstall: %v", err)
	}
	f.wantClean(t)
}

// TestNMUninstallKilledAfterDelete: barn-net was killed inside the undo,
// after NetworkManager deleted the connection and before the bridge went
// (or the connection was inactive, or deleted by hand). Uninstall deletes
// the bridge by its mark; a barn0 with another MAC is kept and named.
func TestNMUninstallKilledAfterDelete(t *testing.T) {
	for _, foreign := range []bool{false, true} {
		f := newFakeHost(t, true, "inactive")
		if _, err := f.install(t, Options{}); err != nil {
			t.Fatal(err)
		}
		f.fakeFile(t, "nm-connections", wiredUUID+":802-3-ethernet:Wired connection 1\n")
		f.fakeFile(t, "nm-active", "")
		if foreign {
			fl := f.Link.(fakeLinks)
			fl.bridge.MAC = "52:54:00:12:34:56"
			f.Link = fl
		}
		p, err := f.Uninstall(context.Background(), nil)
		if err != nil {
			t.Fatalf("uninstall with the connection gone (foreign %v): %v", foreign, err)
		}
		if !foreign {
			f.wantClean(t)
			continue
		}
		if !f.fakeExists("bridge") {
			t.Fatal("a barn0 with another MAC was deleted")
		}
		if !notesContain(p, "kept: barn0 is not the bridge Barn created", "MAC 52:54:00:12:34:56") {
			t.Fatalf("notes must name the kept bridge: %q", p.Notes)
		}
		if m, _ := f.ReadManifest(); m != nil {
			t.Fatal("manifest left")
		}
	}
}

// TestNMUninstallInactiveConnection: Barn's connection is not active
// (NetworkManager lost the device, or it was taken down while the link
// stayed), so no ifindex was known. Uninstall deletes the connection, then
// the bridge by its mark, at once (the old code waited nmLinkWait and failed).
func TestNMUninstallInactiveConnection(t *testing.T) {
	f := newFakeHost(t, true, "inactive")
	if _, err := f.install(t, Options{}); err != nil {
		t.Fatal(err)
	}
	uuid := f.barnUUID(t)
	f.mutations(t)
	f.fakeFile(t, "nm-active", "")
	defer func(w time.Duration) { nmLinkWait = w }(nmLinkWait)
	nmLinkWait = time.Second
	if _, err := f.Uninstall(context.Background(), nil); err != nil {
		t.Fatalf("uninstall of an inactive connection: %v", err)
	}
	wantLog(t, "uninstall", f.mutations(t), "nmcli connection delete uuid "+uuid)
	f.wantClean(t)
}

// TestNMLateAddIsBarns: the add timed out, NetworkManager listed nothing
// within the wait, install rolled back and removed its manifest; then
// NetworkManager carried the add out (and activated it). The next install
// recognises that connection by Barn's mark, removes it first in a step of
// its plan, and installs; a barn0 connection without the mark is refused.
func TestNMLateAddIsBarns(t *testing.T) {
	f := newFakeHost(t, true, "inactive")
	late := f.lostAdd(t)
	// NetworkManager finishes the add and activates it.
	mac := BridgeMAC("barn0", mustSubnet(DefaultCIDR))
	f.markedConn(t, late, "trusted")
	f.fakeFile(t, "nm-active", late+"\n")
	f.fakeFile(t, "bridge", "")
	f.fakeFile(t, "fw-runtime-barn0", "trusted")

	o, err := f.Inspect(context.Background())
	must(t, err)
	p, err := f.PlanInstall(o, Options{})
	if err != nil {
		t.Fatalf("install with the late connection of Barn's: %v", err)
	}
	if p.Steps[1].Kind != KindNMLeftover || p.Steps[1].UUID != late || !strings.Contains(p.Steps[1].Summary, mac) {
		t.Fatalf("the plan must remove the leftover first: %+v", p.Steps[1])
	}
	if _, err := f.Apply(context.Background(), p, Options{}, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(f.root, "fake", "nm-connections")); strings.Contains(string(b), late) || !strings.Contains(string(b), f.barnUUID(t)+":bridge:barn0") {
		t.Fatalf("connections after install: %q", b)
	}
	if m, _ := f.ReadManifest(); m.Prestate.FirewalldZone != "" {
		t.Fatalf("the leftover's trusted binding was recorded as the prestate: %q", m.Prestate.FirewalldZone)
	}
	if _, err := f.Uninstall(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	f.wantClean(t)

	// Without Barn's mark the same connection is someone else's.
	f.fakeFile(t, "nm-connections", wiredUUID+":802-3-ethernet:Wired connection 1\n"+foreignUUID+":bridge:barn0\n")
	f.fakeFile(t, "nm-mac-"+foreignUUID, "52:54:00:12:34:56")
	if _, err := f.install(t, Options{}); err == nil || !strings.Contains(err.Error(), "bridge_foreign") && !strings.Contains(err.Error(), "refusing to adopt") {
		t.Fatalf("install with a foreign barn0 connection: %v", err)
	}
}

// TestNMLeftoverBridgeRemovedByInstall: a barn0 link with Barn's MAC and
// no connection nor manifest (an uninstall that stopped after the
// connection went, then the manifest was removed by hand) is removed by
// the next install, by its ifindex; with another MAC it is refused.
func TestNMLeftoverBridgeRemovedByInstall(t *testing.T) {
	f := newFakeHost(t, true, "inactive")
	f.fakeFile(t, "bridge", "")
	o, err := f.Inspect(context.Background())
	must(t, err)
	p, err := f.PlanInstall(o, Options{})
	if err != nil || p.Steps[1].Kind != KindLinkLeftover {
		t.Fatalf("plan with Barn's leftover bridge: %v %+v", err, p.Steps)
	}
	if _, err := f.Apply(context.Background(), p, Options{}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Uninstall(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	f.wantClean(t)
	fl := f.Link.(fakeLinks)
	fl.bridge.MAC = "52:54:00:12:34:56"
	f.Link = fl
	f.fakeFile(t, "bridge", "")
	if _, err := f.install(t, Options{}); err == nil || !strings.Contains(err.Error(), "refusing to adopt") {
		t.Fatalf("install with a foreign barn0: %v", err)
	}
	if !f.fakeExists("bridge") {
		t.Fatal("the foreign barn0 is gone")
	}
}

// TestNMFirewalldBindingReleased: with firewalld active the connection is
// zoned trusted. The real NetworkManager left barn0 bound in firewalld's
// runtime trusted zone when the active connection was deleted (the old
// undo); uninstall now takes it down first, and removes a binding still
// left (nm-fw-sticks) itself, unless it was there before install or the
// permanent configuration binds barn0 (the user's).
func TestNMFirewalldBindingReleased(t *testing.T) {
	for _, c := range []struct {
		name         string
		sticks, perm bool
		before       string
		wantBound    bool
	}{{"nm-unbinds", false, false, "", false}, {"left-bound", true, false, "", false},
		{"bound-before", true, false, "trusted", true}, {"permanent", true, true, "", true}} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeHost(t, true, "inactive")
			f.fakeFile(t, "firewalld", "active")
			if c.before != "" {
				f.fakeFile(t, "fw-runtime-barn0", c.before)
			}
			if _, err := f.install(t, Options{}); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(filepath.Join(f.root, "fake", "fw-runtime-barn0")); string(b) != "trusted" {
				t.Fatalf("after install firewalld binds barn0 to %q", b)
			}
			if c.sticks {
				f.fakeFile(t, "nm-fw-sticks", "")
			}
			if c.perm {
				f.fakeFile(t, "fw-permanent-barn0", "trusted")
			}
			if _, err := f.Uninstall(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			if f.fakeExists("fw-runtime-barn0") != c.wantBound {
				t.Fatalf("firewalld runtime binding of barn0 after uninstall: %v, want %v", f.fakeExists("fw-runtime-barn0"), c.wantBound)
			}
			if f.fakeExists("bridge") {
				t.Fatal("barn0 left")
			}
		})
	}
}

// TestNMFirewalldReleaseResumed: an uninstall stopped after Barn's
// connection and bridge went but before firewalld's runtime trusted
// binding was released (here firewalld fails; a kill stops at the same
// point) left the step recorded, and the next uninstall judged it done
// because the connection and bridge were gone, leaving barn0 bound to
// trusted. The next uninstall now releases it.
func TestNMFirewalldReleaseResumed(t *testing.T) {
	f := newFakeHost(t, true, "inactive")
	f.fakeFile(t, "firewalld", "active")
	if _, err := f.install(t, Options{}); err != nil {
		t.Fatal(err)
	}
	f.fakeFile(t, "nm-fw-sticks", "")
	f.fakeFile(t, "fw-remove-fails", "")
	if _, err := f.Uninstall(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "COMMAND_FAILED") {
		t.Fatalf("uninstall whose firewalld call failed: %v", err)
	}
	if f.fakeExists("bridge") || !f.fakeExists("fw-runtime-barn0") {
		t.Fatalf("after the failed release: bridge %v, trusted binding %v; want the bridge gone and the binding left", f.fakeExists("bridge"), f.fakeExists("fw-runtime-barn0"))
	}
	must(t, os.Remove(filepath.Join(f.root, "fake", "fw-remove-fails")))
	if _, err := f.Uninstall(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	f.wantClean(t)
}

// TestNMUninstallLeavesAnActiveProfile: a profile of the user's (not
// Barn's UUID) active on barn0, which still has Barn's MAC, keeps its
// device: uninstall deletes Barn's connection and then refuses
// (bridge_in_use) to delete the bridge, naming that connection; once the
// user takes it down, uninstall finishes. Install's leftover step refuses
// the same way, but not for NetworkManager's external connection.
func TestNMUninstallLeavesAnActiveProfile(t *testing.T) {
	const theirs = "0b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d"
	f := newFakeHost(t, true, "inactive")
	if _, err := f.install(t, Options{}); err != nil {
		t.Fatal(err)
	}
	f.fakeFile(t, "nm-connections", wiredUUID+":802-3-ethernet:Wired connection 1\n"+f.barnUUID(t)+":bridge:barn0\n"+theirs+":bridge:my-lab\n")
	f.fakeFile(t, "nm-active", theirs+"\n") // it took the device over from Barn's
	_, err := f.Uninstall(context.Background(), nil)
	if reason(err) != "bridge_in_use" || !strings.Contains(err.Error(), theirs) {
		t.Fatalf("uninstall with the user's profile active on barn0: %v", err)
	}
	if !f.fakeExists("bridge") {
		t.Fatal("barn0 was deleted under the user's active profile")
	}
	if b, _ := os.ReadFile(filepath.Join(f.root, "fake", "nm-connections")); !strings.Contains(string(b), theirs) {
		t.Fatalf("the user's connection is gone: %q", b)
	}
	f.fakeFile(t, "nm-active", "")
	if _, err := f.Uninstall(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if f.fakeExists("bridge") {
		t.Fatal("barn0 left once the user's profile was down")
	}

	f.fakeFile(t, "bridge", "") // a marked bridge no manifest counts, the user's profile on it
	f.fakeFile(t, "nm-active", theirs+"\n")
	if _, err := f.install(t, Options{}); reason(err) != "bridge_in_use" {
		t.Fatalf("install over a marked bridge the user's profile holds: %v", err)
	}
	if !f.fakeExists("bridge") {
		t.Fatal("install's leftover step deleted barn0 under the user's active profile")
	}
	// NetworkManager's own connection for a barn0 configured outside it
	// ("connected (externally)") is no one's profile: the leftover goes.
	f.fakeFile(t, "nm-active", "")
	f.fakeFile(t, "nm-external", "")
	if _, err := f.install(t, Options{}); err != nil {
		t.Fatalf("install over a marked bridge connected externally: %v", err)
	}
}

// reason is err's reason ("" when it has none).
func reason(err error) string {
	if e := exitcode.As(err); e != nil {
		return e.Reason
	}
	return ""
}

// extUUID is NetworkManager's generated connection for a barn0 configured
// outside it (the fake's nm-external device line uses the same UUID).
const extUUID = "5e3c2a10-0000-4000-8000-00000000e47e"

// nmExternal makes the fake list NetworkManager 1.42's external connection
// as the real one does: nm_device_generate_connection gives it
// connection.id = the ifname ("barn0") and type bridge, and the bridge's
// update_connection sets no bridge.mac-address, so it is in
// `nmcli connection show` as barn0/bridge with an empty MAC and no zone.
func (f *fakeHost) nmExternal(t *testing.T) {
	f.fakeFile(t, "nm-external", "")
	b, _ := os.ReadFile(filepath.Join(f.root, "fake", "nm-connections"))
	f.fakeFile(t, "nm-connections", string(b)+extUUID+":bridge:barn0\n")
	f.fakeFile(t, "nm-mac-"+extUUID, "")
	f.fakeFile(t, "nm-zone-"+extUUID, "")
	f.fakeFile(t, "nm-active", extUUID+"\n")
}

// TestNMExternalConnectionIsNoOnes: install over a marked leftover barn0
// that NetworkManager holds "connected (externally)". NetworkManager lists
// the connection it generated for it by the device's name (found by
// review: planNM refused it, bridge_foreign); it is no one's profile, so
// the leftover step removes the bridge.
func TestNMExternalConnectionIsNoOnes(t *testing.T) {
	f := newFakeHost(t, true, "inactive")
	f.fakeFile(t, "bridge", "")
	f.nmExternal(t)
	if _, err := f.install(t, Options{}); err != nil {
		t.Fatalf("install over a marked barn0 connected externally: %v", err)
	}
}

// TestNMUninstallWithExternalConnection: Barn's connection is gone (a
// killed or timed-out delete, or deleted by hand) and barn0 is left up
// with its address, so NetworkManager holds it externally. Uninstall
// deletes Barn's marked bridge and releases the trusted binding (found by
// review: the generated connection, named barn0, made undoCheck keep the
// step, nm_connection_foreign, and uninstall dropped the manifest).
func TestNMUninstallWithExternalConnection(t *testing.T) {
	f := newFakeHost(t, true, "inactive")
	f.fakeFile(t, "firewalld", "active")
	if _, err := f.install(t, Options{}); err != nil {
		t.Fatal(err)
	}
	f.fakeFile(t, "nm-connections", wiredUUID+":802-3-ethernet:Wired connection 1\n")
	f.fakeFile(t, "nm-active", "")
	f.nmExternal(t)
	p, err := f.Uninstall(context.Background(), nil)
	m, _ := f.ReadManifest()
	if err != nil || f.fakeExists("bridge") || f.fakeExists("fw-runtime-barn0") {
		t.Fatalf("uninstall: err %v; barn0 left %v; trusted binding left %v; manifest left %v; notes %q",
			err, f.fakeExists("bridge"), f.fakeExists("fw-runtime-barn0"), m != nil, p.Notes)
	}
}

// TestNetworkdUninstallLeavesAnActiveProfile: the networkd backend
// (--backend networkd, allowed while NetworkManager runs) marks barn0 with
// the same MAC. A user's profile with interface-name barn0 that took the
// device over keeps it: uninstall's networkd undo refuses (found by
// review: it ran networkctl delete without asking NetworkManager).
func TestNetworkdUninstallLeavesAnActiveProfile(t *testing.T) {
	const theirs = "0b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d"
	f := newFakeHost(t, true, "active")
	if _, err := f.install(t, Options{Backend: BackendNetworkd}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(f.root, "fake", "nm-connections"))
	f.fakeFile(t, "nm-connections", string(b)+theirs+":bridge:my-lab\n")
	f.fakeFile(t, "nm-active", theirs+"\n")
	f.mutations(t)
	_, err := f.Uninstall(context.Background(), nil)
	if reason(err) != "bridge_in_use" || !f.fakeExists("bridge") {
		t.Fatalf("uninstall with the user's profile on barn0: err %v, barn0 left %v; commands %q", err, f.fakeExists("bridge"), f.mutations(t))
	}
}

// TestNMCopiedMarkIsNotBarns: Barn's mark (name barn0, type bridge,
// bridge.mac-address) is something anyone can copy; a leftover connection
// is Barn's only when its UUID is in Barn's ledger. The second review's
// finding (2): a clone of Barn's connection that keeps the name barn0
// outlived an uninstall (refused while active, then kept by its UUID),
// and the next install removed it as a leftover. Now that install refuses
// it (bridge_foreign) and keeps it, as it does a copy made by hand; and a
// clean uninstall leaves no ledger behind.
func TestNMCopiedMarkIsNotBarns(t *testing.T) {
	const clone = "0b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d"
	mac := BridgeMAC("barn0", mustSubnet(DefaultCIDR))
	f := newFakeHost(t, true, "inactive")
	if _, err := f.install(t, Options{}); err != nil {
		t.Fatal(err)
	}
	l, err := f.readLedger()
	must(t, err)
	if !l.Has(f.barnUUID(t)) || !l.Connections[0].Seen {
		t.Fatalf("the ledger after install: %+v", l)
	}
	// nmcli connection clone barn0 barn0: same name, type and MAC, its own UUID, active.
	f.fakeFile(t, "nm-connections", wiredUUID+":802-3-ethernet:Wired connection 1\n"+f.barnUUID(t)+":bridge:barn0\n"+clone+":bridge:barn0\n")
	f.fakeFile(t, "nm-mac-"+clone, mac)
	f.fakeFile(t, "nm-active", clone+"\n")
	if _, err := f.Uninstall(context.Background(), nil); reason(err) != "bridge_in_use" {
		t.Fatalf("uninstall with the clone active on barn0: %v", err)
	}
	if _, err := f.Uninstall(context.Background(), nil); err != nil {
		t.Fatalf("the second uninstall: %v", err)
	}
	if m, _ := f.ReadManifest(); m != nil {
		t.Fatal("the manifest is left")
	}
	if l, err := f.readLedger(); err != nil || len(l.Connections) != 0 {
		t.Fatalf("Barn's own UUID is still in the ledger after its connection went: %+v %v", l, err)
	}
	if _, err := os.Stat(f.LedgerPath()); !os.IsNotExist(err) {
		t.Fatalf("an empty ledger is left: %v", err)
	}
	for _, active := range []string{clone + "\n", ""} { // the clone, active or not
		f.fakeFile(t, "nm-active", active)
		if _, err := f.install(t, Options{}); reason(err) != "bridge_foreign" {
			t.Fatalf("install over a copy of Barn's mark (active %q): %v", active, err)
		}
		if b, _ := os.ReadFile(filepath.Join(f.root, "fake", "nm-connections")); !strings.Contains(string(b), clone+":bridge:barn0") {
			t.Fatalf("the clone is gone: %q", b)
		}
	}
}

// TestNMLedgerDamagedIsNotEmpty: a damaged ledger stops inspection with
// integrity (7) naming it; it is never read as "Barn chose no UUID".
func TestNMLedgerDamagedIsNotEmpty(t *testing.T) {
	f := newFakeHost(t, true, "inactive")
	must(t, os.MkdirAll(f.StateDir, 0o755))
	must(t, os.WriteFile(f.LedgerPath(), []byte(`{"schema":"barn.net.nm-uuids/v1","connections":[{"uuid":`), 0o600))
	_, err := f.Inspect(context.Background())
	if e := exitcode.As(err); e == nil || e.Class != exitcode.Integrity || !strings.Contains(e.Message, f.LedgerPath()) || !strings.Contains(e.Next, "sudo rm "+f.LedgerPath()) {
		t.Fatalf("inspect with a damaged ledger: %#v", err)
	}
}

// TestNMInactiveLeftoverKeepsTheUsersBinding: the second review's finding
// (4). A late-added connection of Barn's, zoned trusted but inactive,
// gave firewalld no binding (NetworkManager binds the zone while a
// connection is active), so a runtime binding of barn0 to trusted is the
// user's: install removes the leftover, records that binding as the
// prestate and keeps it, and uninstall leaves it. The same leftover active
// is released with it (TestNMLateAddIsBarns).
func TestNMInactiveLeftoverKeepsTheUsersBinding(t *testing.T) {
	f := newFakeHost(t, true, "inactive")
	late := f.lostAdd(t)
	f.markedConn(t, late, "trusted")
	f.fakeFile(t, "nm-active", "")               // added, never activated
	f.fakeFile(t, "fw-runtime-barn0", "trusted") // the user's own runtime binding
	f.fakeFile(t, "nm-fw-sticks", "")            // NetworkManager's teardown does not release it either
	if _, err := f.install(t, Options{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(f.root, "fake", "nm-connections")); strings.Contains(string(b), late) {
		t.Fatal("the leftover connection is still there")
	}
	if m, _ := f.ReadManifest(); m == nil || m.Prestate.FirewalldZone != "trusted" {
		t.Fatalf("the user's binding is not the recorded prestate: %+v", m)
	}
	if _, err := f.Uninstall(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if !f.fakeExists("fw-runtime-barn0") {
		t.Fatal("the user's runtime binding of barn0 to trusted was released")
	}
}

// lostAdd runs an install, firewalld active, whose nmcli connection add
// times out and never shows within the wait, so install rolls back; it
// returns the UUID handed to nmcli, which the ledger keeps unseen, and
// lets the fake add connections again.
func (f *fakeHost) lostAdd(t *testing.T) string {
	t.Helper()
	f.fakeFile(t, "firewalld", "active")
	f.fakeFile(t, "nm-add-timeout", "")
	f.fakeFile(t, "nm-add-lost", "")
	w := nmAddWait
	nmAddWait = 0
	_, err := f.install(t, Options{})
	nmAddWait = w
	if err == nil || !strings.Contains(err.Error(), "rolled back") {
		t.Fatalf("install: want a rollback, got %v", err)
	}
	var late string
	for _, l := range f.mutations(t) {
		if strings.HasPrefix(l, "nmcli connection add ") {
			late = l[strings.LastIndex(l, " ")+1:]
		}
	}
	if !uuidRE.MatchString(late) {
		t.Fatalf("no add logged")
	}
	if l, err := f.readLedger(); err != nil || len(l.Connections) != 1 || l.Connections[0].UUID != late || l.Connections[0].Seen {
		t.Fatalf("the ledger after a lost add of %s: %+v %v", late, l, err)
	}
	must(t, os.Remove(filepath.Join(f.root, "fake", "nm-add-timeout")))
	must(t, os.Remove(filepath.Join(f.root, "fake", "nm-add-lost")))
	return late
}
