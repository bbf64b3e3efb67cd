package hostnet

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/quote"
)

// FaultRequest is a fault to inject (see Fault for the fields).
type FaultRequest struct {
	Kind   string
	A, B   []Member
	OneWay bool
	Netem  *Netem
}

// FaultView is a recorded fault with what the host shows of it: Enforced
// is true when the kernel holds every rule (or the netem qdisc) the
// record implies; Problem says why not.
type FaultView struct {
	Fault
	AgeSeconds int64  `json:"age_seconds"`
	Enforced   bool   `json:"enforced"`
	Problem    string `json:"problem,omitempty"`
	Next       string `json:"next,omitempty"`
}

// faultHook is called after every durable fault step (tests inject crashes).
func (h *Host) faultHook(step string) {
	if h.FaultHook != nil {
		h.FaultHook(step)
	}
}

// faultManifest returns the installed network, or a conflict when none is.
func (h *Host) faultManifest() (*Manifest, error) {
	m, err := h.ReadManifest()
	if err != nil {
		return nil, err
	}
	if m == nil || m.Status != StatusInstalled {
		return nil, exitcode.New(exitcode.Capability, "no Barn network is installed; faults act on its bridge").
			WithReason("network_unusable").WithNext("barn-net install")
	}
	if m.Backend == BackendVmnet || runtimeOS != "linux" {
		return nil, exitcode.New(exitcode.Capability, "network faults need nftables and tc on a Linux bridge (backend %s)", m.Backend).WithReason("faults_unsupported")
	}
	return m, h.sameFaultBridge(m.Bridge)
}

// sameFaultBridge refuses to act when bridge, the one the state
// directory's network or fault record names, is not h.Bridge
// (BARN_BRIDGE): the nftables table is named after h.Bridge (FaultTable)
// and the record is the state directory's, so acting would write one
// network's faults into another's table, where no record names them.
func (h *Host) sameFaultBridge(bridge string) error {
	if bridge == "" || bridge == h.Bridge {
		return nil
	}
	return exitcode.New(exitcode.Usage, "the state directory %s holds the network of bridge %s, and BARN_BRIDGE names %s", h.StateDir, bridge, h.Bridge).
		WithReason("fault_bridge_mismatch").WithNext(fmt.Sprintf("BARN_BRIDGE=%s BARN_NET_STATE=%s barn-net fault list", quote.ShellIfNeeded(bridge), quote.ShellIfNeeded(h.StateDir)))
}

// AddFault records req, enforces it and returns the recorded fault.
// Steps (FaultHook): fault_recorded (state installing) → fault_converged
// (enforced, record not yet updated) → the record says active. A failed
// enforcement heals the fault again before the error is returned.
func (h *Host) AddFault(ctx context.Context, req FaultRequest, now time.Time) (Fault, error) {
	unlock, err := h.lockFaults(ctx, true)
	if err != nil {
		return Fault{}, err
	}
	defer unlock()
	m, err := h.faultManifest()
	if err != nil {
		return Fault{}, err
	}
	groups := [][]Member{req.A}
	if req.Kind == FaultPartition {
		groups = append(groups, req.B)
	}
	if err := checkMembers(m, groups...); err != nil {
		return Fault{}, err
	}
	r, err := h.convergeFaults(ctx)
	if err != nil {
		return Fault{}, err
	}
	if req.Kind == FaultDegrade {
		if id, ok := r.degraded(req.A[0].Address); ok {
			return Fault{}, exitcode.New(exitcode.Conflict, "%s is already degraded by %s", req.A[0].Name, id).
				WithReason("fault_conflict").WithNext("barn-net fault heal " + id)
		}
	}
	f := Fault{ID: fmt.Sprintf("f%d", r.Next), Kind: req.Kind, State: FaultInstalling, A: req.A, B: req.B,
		OneWay: req.OneWay, Netem: req.Netem, Bridge: m.Bridge, Created: now.UTC().Truncate(time.Second)}
	if f.Kind == FaultIsolate {
		f.HostAddress = m.HostAddress
	}
	r.Next++
	r.Faults = append(r.Faults, f)
	if err := h.writeFaults(r); err != nil {
		return Fault{}, err
	}
	h.faultHook("fault_recorded")
	if _, err := h.convergeFaults(ctx); err != nil {
		if _, herr := h.healFaults(ctx, []string{f.ID}, false); herr != nil {
			return Fault{}, exitcode.Wrap(exitcode.ClassOf(err), err, "%s not injected, and healing it failed too (%v)", f.ID, herr).
				WithReason("fault_apply_failed").WithNext("barn-net fault heal " + f.ID)
		}
		return Fault{}, err
	}
	f.State = FaultActive
	return f, nil
}

// HealFaults removes the faults ids (all with all) and returns the ones
// healed. An unknown ID is a usage error naming the recorded ones. Steps:
// heal_recorded (state healing) → fault_converged (effects gone) → the
// record drops them.
func (h *Host) HealFaults(ctx context.Context, ids []string, all bool) ([]Fault, error) {
	return h.lockedHeal(ctx, ids, all, true)
}

// lockedHeal is HealFaults under the fault lock, and under the shared
// network lock unless the caller holds it (network false).
func (h *Host) lockedHeal(ctx context.Context, ids []string, all, network bool) ([]Fault, error) {
	unlock, err := h.lockFaults(ctx, network)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return h.healFaults(ctx, ids, all)
}

func (h *Host) healFaults(ctx context.Context, ids []string, all bool) ([]Fault, error) {
	r, err := h.ReadFaults()
	if err != nil {
		return nil, err
	}
	if len(r.Faults) == 0 && len(ids) == 0 {
		return []Fault{}, nil // nothing recorded: nothing of Barn's to touch
	}
	for _, f := range r.Faults {
		if err := h.sameFaultBridge(f.Bridge); err != nil {
			return nil, err
		}
	}
	known := []string{}
	for _, f := range r.Faults {
		known = append(known, f.ID)
	}
	for _, id := range ids {
		if !slices.Contains(known, id) {
			return nil, exitcode.New(exitcode.Usage, "no recorded fault %s (recorded: %v)", id, known).WithReason("fault_unknown").WithNext("barn-net fault list")
		}
	}
	healed := []Fault{}
	for i := range r.Faults {
		if all || slices.Contains(ids, r.Faults[i].ID) {
			r.Faults[i].State = FaultHealing
			healed = append(healed, r.Faults[i])
		}
	}
	if len(healed) > 0 {
		if err := h.writeFaults(r); err != nil {
			return nil, err
		}
		h.faultHook("heal_recorded")
	}
	_, err = h.convergeFaults(ctx)
	return healed, err
}

// convergeFaults makes the host what the record says: healing faults lose
// their effects and their records, installing ones are enforced and become
// active, and Barn's table holds exactly the remaining faults' rules.
func (h *Host) convergeFaults(ctx context.Context) (*FaultRecord, error) {
	r, err := h.ReadFaults()
	if err != nil {
		return nil, err
	}
	for _, f := range r.Faults {
		if f.Kind != FaultDegrade || f.State == FaultActive {
			continue
		}
		tap, err := h.NodeTap(f.Bridge, netip.MustParseAddr(f.A[0].Address))
		switch {
		case err != nil:
			return nil, err
		case f.State == FaultHealing && tap != "":
			err = h.clearNetem(ctx, tap)
		case f.State == FaultInstalling && tap == "":
			err = exitcode.New(exitcode.Conflict, "%s (%s) has no running QEMU on %s: a stopped node has no link to degrade", f.A[0].Name, f.A[0].Address, f.Bridge).
				WithReason("fault_target_down").WithNext("barn-node start " + f.A[0].Name)
		case f.State == FaultInstalling:
			err = h.setNetem(ctx, tap, f.Netem)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := h.syncFaultTable(ctx, r.Faults); err != nil {
		return nil, err
	}
	if slices.ContainsFunc(r.Faults, func(f Fault) bool { return f.State != FaultActive }) {
		h.faultHook("fault_converged")
	}
	kept := r.Faults[:0]
	for _, f := range r.Faults {
		if f.State != FaultHealing {
			f.State = FaultActive
			kept = append(kept, f)
		}
	}
	r.Faults = kept
	return r, h.writeFaults(r)
}

// FaultViews lists the recorded faults with their age at now and whether
// the host enforces them (read-only).
func (h *Host) FaultViews(ctx context.Context, now time.Time) ([]FaultView, error) {
	r, err := h.ReadFaults()
	if err != nil {
		return nil, err
	}
	out := []FaultView{}
	if len(r.Faults) == 0 {
		return out, nil
	}
	table, terr := h.listFaultTable(ctx)
	for _, f := range r.Faults {
		v := FaultView{Fault: f, AgeSeconds: int64(now.Sub(f.Created) / time.Second)}
		switch {
		case f.State != FaultActive:
			v.Problem = "interrupted while " + f.State
		case f.Kind == FaultDegrade:
			v.Enforced, v.Problem = h.netemEnforced(ctx, f)
		case terr != nil:
			v.Problem = terr.Error()
		default:
			n := countComment(table, f.ID)
			v.Enforced = n == faultRuleCount(f)
			if !v.Enforced {
				v.Problem = fmt.Sprintf("Barn's table holds %d of its %d rules", n, faultRuleCount(f))
			}
		}
		if !v.Enforced {
			v.Next = "barn-net fault heal " + f.ID
		}
		out = append(out, v)
	}
	return out, nil
}

func (h *Host) netemEnforced(ctx context.Context, f Fault) (bool, string) {
	tap, err := h.NodeTap(f.Bridge, netip.MustParseAddr(f.A[0].Address))
	if err != nil || tap == "" {
		return false, fmt.Sprintf("%s has no running QEMU (a restarted node's new tap is not degraded)", f.A[0].Name)
	}
	handle, _, err := h.rootQdisc(ctx, tap)
	if err != nil || handle != FaultQdiscHandle {
		return false, fmt.Sprintf("tap %s has no Barn netem qdisc (a restarted node's new tap is not degraded)", tap)
	}
	return true, ""
}

func countComment(table, id string) int {
	return strings.Count(table, fmt.Sprintf("comment %q", "barn-fault "+id))
}
