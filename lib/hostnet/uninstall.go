package hostnet

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"barn.dev/lib/exitcode"
)

// PlanUninstall returns the uninstall plan (the applied steps' undos in
// reverse). What an undo would act on but Barn cannot prove it created or
// left so (undoCheck: a link or NetworkManager connection of Barn's name
// that is not the one recorded, a unit no longer in the state Barn left it
// in) is kept: its undo is left out
// of the steps and a note "kept: <what differs> (next: <command>)" says so.
// It refuses, changing nothing:
//   - conflict "bridge_in_use" while a link is attached to Barn's own
//     bridge, and "bridge_users" while a process in this network namespace
//     runs with a NIC on it (what "recorded nodes are live" means to
//     barn-net: users.go);
//   - integrity "owned_file_modified" when a file Barn wrote has neither
//     the digest recorded at install nor its recorded prestate (an undo
//     that a crash stopped before the manifest counted it restored that).
//
// A step a crash left in flight is settled first (settleInFlight), on a
// copy of o.Manifest: o is not changed.
//
// With no manifest it returns a Noop plan.
func (h *Host) PlanUninstall(o Observed) (Plan, error) {
	p, _, err := h.planUninstall(o)
	return p, err
}

// planUninstall is PlanUninstall, also returning the manifest the plan
// undoes: o.Manifest's copy with the in-flight step settled. Settling is
// a judgement of the host against the next step, so settling an already
// settled manifest again could count one more step as Barn's.
func (h *Host) planUninstall(o Observed) (Plan, *Manifest, error) {
	p := Plan{Schema: PlanSchema, Action: "uninstall", Bridge: h.bridge(), Manifest: h.ManifestPath(), Helper: h.Helper,
		Verified: true, Notes: []string{}, Steps: []Step{}}
	if o.Manifest == nil {
		p.Noop = true
		p.Notes = append(p.Notes, "no manifest at "+h.ManifestPath()+": Barn installed nothing here, so nothing is removed")
		p.Notes = append(p.Notes, o.NM.Ledger.keptNotes(h.LedgerPath(), o.NM.Connections, "")...)
		return p, nil, nil
	}
	settled := *o.Manifest // settleInFlight changes Applied only
	m := &settled
	p.Backend, p.Bridge, p.CIDR, p.HostAddress, p.Helper = m.Backend, m.Bridge, m.CIDR, m.HostAddress, m.Helper
	now := nowOf(o)
	h.settleInFlight(m, now)
	claimed := "" // the manifest's connection, once its add counts as applied
	if m.Created.NMConnection != nil && slices.ContainsFunc(m.Steps[:m.Applied], func(s Step) bool { return s.Kind == KindNMAdd }) {
		claimed = m.Created.NMConnection.UUID
	}
	p.Notes = append(p.Notes, o.NM.Ledger.keptNotes(h.LedgerPath(), o.NM.Connections, claimed)...)
	kept := map[int]string{}
	for j := m.Applied - 1; j >= 0; j-- {
		if _, refusal := h.undoCheck(m, m.Steps[j], now); refusal != nil {
			kept[j] = keptNote(refusal)
			if !slices.Contains(p.Notes, kept[j]) {
				p.Notes = append(p.Notes, kept[j])
			}
		}
	}
	// Taps on a bridge proven foreign are not Barn's concern; with no link
	// identity recorded (NetworkManager's bridge) every
	// tap on the bridge's name blocks, the cautious reading.
	if v := h.judgeBridge(m.Created.Bridge, m.Bridge, o.Links); m.Created.Bridge == nil || !v.foreign() {
		if att := o.Attached(m.Bridge); len(att) > 0 {
			return p, nil, exitcode.New(exitcode.Conflict, "bridge %s still has attached links (%s); stop the VMs that use it first", m.Bridge, strings.Join(att, ", ")).
				WithReason("bridge_in_use").WithNext("barn-node status").WithDetail(att)
		}
	}
	users, err := h.bridgeUsers(m.Bridge)
	if err != nil {
		return p, nil, exitcode.Wrap(exitcode.Runtime, err, "looking for processes that use %s", m.Bridge)
	}
	if len(users) > 0 {
		return p, nil, exitcode.New(exitcode.Conflict, "processes in this network namespace run with a NIC on %s (%s); stop those VMs first (barn-node stop or destroy, as the user who started them)",
			m.Bridge, strings.Join(users, ", ")).WithReason("bridge_users").WithNext("barn-node status").WithDetail(users)
	}
	for _, s := range m.Steps[:m.Applied] {
		if s.Kind != KindWriteFile {
			continue
		}
		if _, refusal := h.fileUndo(s); refusal != nil {
			return p, nil, refusal
		}
	}
	for j := m.Applied - 1; j >= 0; j-- {
		s := m.Steps[j]
		if _, ok := kept[j]; ok {
			continue
		}
		if sum := undoSummary(s); sum != "" {
			u := s
			u.Summary = sum
			p.add(u)
		}
	}
	return p, m, nil
}

func short(s string) string {
	if s == "" {
		return "(absent)"
	}
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

func undoSummary(s Step) string {
	switch s.Kind {
	case KindManifest:
		return "remove the manifest " + s.Path
	case KindBridgeAdd:
		return "delete bridge " + s.Link + " (by ifindex, once its MAC, alias and ifindex are the ones recorded)"
	case KindNetworkdReload:
		return "networkctl delete " + s.Link + " (by ifindex, once its MAC is the .netdev's and its ifindex the one recorded)"
	case KindNMAdd:
		sum := "nmcli connection down (while active) and delete uuid <the recorded UUID> (" + s.Link + "), then the bridge " + s.Link + " by its ifindex while it has Barn's MAC and no other connection is active on it"
		if zoned(s) {
			sum += ", then firewalld's runtime binding of " + s.Link + " to trusted if NetworkManager left it (and it is not the user's)"
		}
		return sum
	case KindUnitStart:
		if s.Path != "" {
			return fmt.Sprintf("systemctl stop %s while it is still active (recorded before install: %s), then remove the files networkd wrote under %s (its state was absent before install)", s.Unit, s.Was, filepath.Dir(s.Path))
		}
		return fmt.Sprintf("systemctl stop %s while it is still active (recorded before install: %s)", s.Unit, s.Was)
	case KindUnitEnable:
		return fmt.Sprintf("systemctl disable %s while it is still enabled (recorded before install: %s)", s.Unit, s.Was)
	case KindAddrAdd:
		return fmt.Sprintf("remove %s from %s", s.Address, s.Link)
	case KindMkdir:
		return "remove the directory " + s.Path + " (Barn created it)"
	case KindWriteFile:
		if s.Prev == nil || !s.Prev.Exists {
			return "remove " + s.Path + " (Barn created it)"
		}
		return fmt.Sprintf("restore %s to its recorded content (sha256 %s, mode %s)", s.Path, short(s.Prev.SHA256), s.Prev.Mode)
	case KindChmod:
		return fmt.Sprintf("chmod %s %s (the recorded mode)", s.Prev.Mode, s.Path)
	case KindCommand:
		if len(s.UndoArgv) > 0 {
			return strings.Join(s.UndoArgv, " ")
		}
	}
	return ""
}

// Uninstall removes what the manifest records, after the PlanUninstall
// checks, restoring the prestate exactly; each undo checks again right
// before it acts (undoCheck) and keeps, with a "kept:" progress line, what
// it cannot prove. It returns the executed plan.
func (h *Host) Uninstall(ctx context.Context, progress Progress) (Plan, error) {
	o, err := h.Inspect(ctx)
	if err != nil {
		return Plan{}, exitcode.Wrap(exitcode.Runtime, err, "inspecting the host")
	}
	return h.UninstallInspected(ctx, o, progress)
}

// UninstallInspected is Uninstall on o, an inspection the caller took
// under the host lock with nothing waited on since (as ApplyInspected).
func (h *Host) UninstallInspected(ctx context.Context, o Observed, progress Progress) (Plan, error) {
	if progress == nil {
		progress = func(string) {}
	}
	p, m, err := h.planUninstall(o)
	if err != nil || p.Noop {
		return p, err
	}
	if err := h.ledgerForgetGone(o.NM.Ledger, o.NM.Connections); err != nil {
		return p, exitcode.Wrap(exitcode.Runtime, err, "updating %s", h.LedgerPath()).WithReason("uninstall_failed").WithNext("barn-net status")
	}
	if err := h.healBeforeUninstall(ctx, progress); err != nil {
		return p, err
	}
	for i, s := range p.Steps {
		progress(fmt.Sprintf("[%d/%d] %s", i+1, len(p.Steps), s.Summary))
	}
	kept, err := h.undoApplied(ctx, m, true)
	for _, k := range kept {
		if !slices.Contains(p.Notes, k) {
			p.Notes = append(p.Notes, k) // found only right before acting
		}
		progress(k)
	}
	if e := exitcode.As(err); e != nil && e.Class == exitcode.Conflict {
		// A refusal found while acting keeps its class, reason and hint.
		return p, exitcode.Wrap(exitcode.Conflict, err, "uninstall stopped").WithReason(e.Reason).WithNext(e.Next).WithDetail(e.Detail)
	}
	if err != nil {
		return p, exitcode.Wrap(exitcode.Runtime, err, "uninstall stopped").WithReason("uninstall_failed").WithNext("barn-net status")
	}
	if _, err := os.Lstat(h.StateDir); errors.Is(err, fs.ErrNotExist) {
		progress("removed " + h.StateDir + " (Barn created it for its manifests)")
	}
	return p, nil
}

// keptNote is the plan note for an undo refused by undoCheck.
func keptNote(refusal error) string {
	n := "kept: " + refusal.Error()
	if e := exitcode.As(refusal); e != nil && e.Next != "" {
		n += " (next: " + e.Next + ")"
	}
	return n
}

// healBeforeUninstall heals every recorded fault, which acts on the bridge
// about to go. Without a record it takes no fault lock either: an
// uninstall leaves no lock file of a feature the host never used.
func (h *Host) healBeforeUninstall(ctx context.Context, progress Progress) error {
	// The caller holds the network lock: no fault command runs now.
	if r, err := h.ReadFaults(); err == nil && len(r.Faults) == 0 {
		return nil
	}
	healed, err := h.lockedHeal(ctx, nil, true, false)
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "healing the recorded network faults before uninstall").WithReason("uninstall_failed").WithNext("barn-net fault list")
	}
	for _, f := range healed {
		progress("healed fault " + f.ID + ": " + f.Describe())
	}
	return nil
}
