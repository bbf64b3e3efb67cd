package hostnet

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/wire"
)

// Progress receives one line per step; nil discards.
type Progress func(line string)

// Apply executes plan (the one shown to the user) as a transaction: it
// re-inspects the host and recomputes the plan, refusing with conflict
// "stale_plan" when anything changed (step 3); writes the manifest with the
// prestate first (step 4); applies each step, recording progress in the
// manifest; runs the readiness proof (step 5); and marks the manifest
// installed only then (step 6). When a step or the proof fails, every
// applied step is undone in reverse and the error names the failed step.
// When an undo fails too, the manifest is kept and the error says
// "automatic rollback failed" (runtime, next: inspect, then uninstall).
func (h *Host) Apply(ctx context.Context, plan Plan, opt Options, progress Progress) (*Manifest, error) {
	if plan.Noop {
		return nil, nil
	}
	if err := runsHere(plan); err != nil {
		return nil, err
	}
	obs, err := h.Inspect(ctx)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "re-inspecting the host")
	}
	return h.ApplyInspected(ctx, obs, plan, opt, progress)
}

// runsHere refuses (capability, backend_unavailable) a plan of a backend
// this OS cannot run: macOS's, shown on Linux for review.
func runsHere(plan Plan) error {
	if !plan.Verified && runtimeOS != "darwin" {
		return exitcode.New(exitcode.Capability, "the %s backend runs on macOS only; its plan is shown for review", plan.Backend).WithReason("backend_unavailable")
	}
	return nil
}

// ApplyInspected is Apply on obs, an inspection the caller took under the
// host lock (lockedHost) with nothing waited on since (no question asked):
// a second inspection would see the same host, and costs seconds of
// nmcli and systemctl runs. A plan that did not come from obs must still
// be the one obs gives (stale_plan otherwise).
func (h *Host) ApplyInspected(ctx context.Context, obs Observed, plan Plan, opt Options, progress Progress) (*Manifest, error) {
	if progress == nil {
		progress = func(string) {}
	}
	if plan.Noop {
		return nil, nil
	}
	if err := runsHere(plan); err != nil {
		return nil, err
	}
	fresh, err := h.PlanInstall(obs, opt)
	if err != nil {
		return nil, err
	}
	if wire.MustHash(fresh) != wire.MustHash(plan) {
		return nil, exitcode.New(exitcode.Conflict, "the host changed since the plan was computed; review the new plan").
			WithReason("stale_plan").WithNext("barn-net plan")
	}
	sn := mustSubnet(plan.CIDR)
	id, err := newInstallID()
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "starting the install")
	}
	m := &Manifest{Schema: ManifestSchema, Status: StatusInstalling, InstallID: id, Backend: plan.Backend, Bridge: plan.Bridge,
		CIDR: plan.CIDR, HostAddress: plan.HostAddress, DHCPEnd: sn.DHCPEnd().String(), Helper: plan.Helper,
		Prestate: Prestate{BridgeConf: obs.BridgeConf, QemuDir: obs.QemuDir, Helper: obs.Helper, Units: obs.Networkd.Units,
			FirewalldZone: prestateZone(obs, plan)},
		Steps: plan.Steps, Files: map[string]string{}}
	// Write-ahead: how Barn will recognise its bridge is in the manifest
	// (written by the first step) before the bridge exists.
	switch plan.Backend {
	case BackendNetlink:
		m.Created.Bridge = netlinkIdentity(plan.Bridge, id)
	case BackendNetworkd:
		m.Created.Bridge = &LinkIdentity{Name: plan.Bridge, MAC: BridgeMAC(plan.Bridge, sn)}
	case BackendNetworkManager:
		uuid, err := newNMUUID()
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Runtime, err, "starting the install")
		}
		m.Created.NMConnection = &NMConnection{UUID: uuid, Name: plan.Bridge}
		m.Created.Bridge = &LinkIdentity{Name: plan.Bridge, MAC: BridgeMAC(plan.Bridge, sn)}
	}
	for i, s := range plan.Steps {
		if err := ctx.Err(); err != nil {
			return nil, h.rollback(m, fmt.Errorf("cancelled before step %d (%s): %w", i+1, s.ID, err), i, s)
		}
		progress(fmt.Sprintf("[%d/%d] %s", i+1, len(plan.Steps), s.Summary))
		err := h.applyStep(ctx, m, &plan, s)
		if err == nil {
			h.crashPoint("install", s.ID)
			m.Applied = i + 1
			if s.Kind == KindWriteFile {
				m.Files[s.Path] = digest([]byte(s.Content))
			}
			err = h.pinBridge(m)
			if err == nil && h.FailAfter == s.ID {
				err = fmt.Errorf("injected failure after step %s", s.ID)
			} else if err == nil {
				err = h.writeManifest(m)
			}
		}
		if err != nil {
			return nil, h.rollback(m, err, i, s)
		}
	}
	m.Status = StatusInstalled
	if err := h.writeManifest(m); err != nil {
		return nil, h.rollback(m, err, len(plan.Steps)-1, plan.Steps[len(plan.Steps)-1])
	}
	progress("installed: " + plan.Bridge + " " + plan.HostAddress + "/24 is ready")
	return m, nil
}

// rollback undoes m's applied steps in reverse and returns the error to
// report for cause at step i.
func (h *Host) rollback(m *Manifest, cause error, i int, s Step) error {
	// The failed step may have taken effect, unless it refused before it
	// acted (stale_plan: what its pre-check saw, say another barn-net's
	// setuid bit on the shared helper, is not this step's to undo).
	if e := exitcode.As(cause); m.Applied == i && (e == nil || e.Reason != "stale_plan") {
		if now, err := h.now(context.Background(), s); err == nil {
			h.settleInFlight(m, now)
		}
	}
	class := exitcode.ClassOf(cause)
	if class == exitcode.OK || class == exitcode.Cancelled && !errors.Is(cause, context.Canceled) {
		class = exitcode.Runtime
	}
	if _, uerr := h.undoApplied(context.Background(), m, false); uerr != nil {
		return exitcode.New(exitcode.Runtime, "install failed at step %d (%s): %v; automatic rollback failed: %v; the manifest %s is kept — inspect manually",
			i+1, s.ID, cause, uerr, h.ManifestPath()).WithReason("rollback_failed").WithNext("barn-net status")
	}
	reason := "install_failed"
	var xe *exitcode.Error
	if errors.As(cause, &xe) && xe.Reason != "" {
		reason = xe.Reason
	}
	return exitcode.New(class, "install failed at step %d (%s): %v; rolled back to the prestate", i+1, s.ID, cause).WithReason(reason)
}

// undoApplied undoes m.Steps[:m.Applied] in reverse. On an undo failure it
// stops, records the remaining applied count in the manifest (when the
// manifest step is still applied) and returns the error. keep turns each
// refusal to undo something Barn cannot prove is its own (undoCheck) into a
// keptNote in the returned list, leaving that thing in place.
func (h *Host) undoApplied(ctx context.Context, m *Manifest, keep bool) ([]string, error) {
	var kept []string
	for j := m.Applied - 1; j >= 0; j-- {
		if err := h.undoStep(ctx, m, m.Steps[j], keep, &kept); err != nil {
			m.Applied = j + 1
			err = fmt.Errorf("undoing step %d (%s): %w", j+1, m.Steps[j].ID, err)
			if m.Steps[0].Kind == KindManifest {
				if werr := h.writeManifest(m); werr != nil {
					err = errors.Join(err, fmt.Errorf("recording %d step(s) still applied in the manifest: %w", m.Applied, werr))
				}
			}
			return kept, err
		}
		h.crashPoint("uninstall", m.Steps[j].ID)
		m.Applied = j
		if j > 0 && m.Steps[0].Kind == KindManifest {
			if err := h.writeManifest(m); err != nil {
				return kept, err
			}
		}
	}
	return kept, nil
}

func (h *Host) applyStep(ctx context.Context, m *Manifest, p *Plan, s Step) error {
	switch s.Kind {
	case KindManifest:
		m.Applied = 0
		return h.writeManifest(m)
	case KindBridgeAdd:
		id := m.Created.Bridge
		if id == nil {
			return fmt.Errorf("no identity recorded for bridge %s", s.Link)
		}
		return h.Link.AddBridge(s.Link, id.MAC, id.Alias)
	case KindNMAdd:
		rec := m.Created.NMConnection
		if rec == nil || rec.UUID == "" {
			return fmt.Errorf("no NetworkManager connection UUID recorded before adding %s", s.Link)
		}
		if err := h.ledgerRecord(rec.UUID, s.Link); err != nil {
			return err
		}
		h.crashPoint("install", "nm-uuid-recorded")
		return h.addNMConnection(ctx, s, rec.UUID)
	case KindNMUp:
		rec := m.Created.NMConnection
		if rec == nil || rec.UUID == "" {
			return fmt.Errorf("no NetworkManager connection recorded for %s", s.Link)
		}
		return h.command(ctx, "nmcli", "connection", "up", "uuid", rec.UUID)
	case KindUnitStart:
		return h.command(ctx, "systemctl", "start", s.Unit)
	case KindUnitEnable:
		return h.command(ctx, "systemctl", "enable", s.Unit)
	case KindNetworkdReload:
		return h.command(ctx, "networkctl", "reload")
	case KindAddrAdd:
		return h.Link.AddAddr(s.Link, s.Address)
	case KindLinkUp:
		return h.Link.SetUp(s.Link)
	case KindMkdir:
		mode, err := parseMode(s.Mode)
		if err != nil {
			return err
		}
		if err := os.Mkdir(s.Path, 0o700); err != nil {
			return err
		}
		return chmodRaw(s.Path, mode)
	case KindWriteFile:
		cur, err := StatFile(s.Path, false)
		if err != nil {
			return err
		}
		if s.Prev != nil && (cur.Exists != s.Prev.Exists || cur.SHA256 != s.Prev.SHA256) {
			return exitcode.New(exitcode.Conflict, "%s changed since the plan was computed", s.Path).WithReason("stale_plan")
		}
		mode, err := parseMode(s.Mode)
		if err != nil {
			return err
		}
		return writeAtomic(s.Path, []byte(s.Content), mode)
	case KindChmod:
		mode, err := parseMode(s.Mode)
		if err != nil {
			return err
		}
		cur, err := StatFile(s.Path, false)
		if err != nil {
			return err
		}
		if s.Prev != nil && cur.Mode != s.Prev.Mode {
			return exitcode.New(exitcode.Conflict, "%s changed mode since the plan was computed", s.Path).WithReason("stale_plan")
		}
		return chmodRaw(s.Path, mode)
	case KindCommand:
		return h.command(ctx, s.Argv...)
	case KindNMLeftover, KindLinkLeftover:
		return h.removeLeftover(ctx, p, s)
	case KindAttachProof:
		prove := h.Prover
		if prove == nil {
			prove = ProveAttach
		}
		if err := prove(ctx, h, p); err != nil {
			return exitcode.Wrap(exitcode.Capability, err, "readiness proof failed").WithReason("attach_failed")
		}
		return nil
	}
	return fmt.Errorf("unknown step kind %q", s.Kind)
}

// crashPoint calls h.CrashAfter, the test seam between a step's effect (or
// undo) and the manifest write that records it.
func (h *Host) crashPoint(phase, stepID string) {
	if h.CrashAfter != nil {
		h.CrashAfter(phase, stepID)
	}
}

// command runs argv through the Runner; a failure names it and its first line of output.
func (h *Host) command(ctx context.Context, argv ...string) error {
	if out, err := h.Runner.Run(ctx, argv); err != nil {
		return fmt.Errorf("%v: %w: %s", argv, err, firstLine(string(out)))
	}
	return nil
}

// undoStep undoes one applied step after undoCheck on the host as it is
// now; with keep, a refusal is added to kept (once) instead of returned.
func (h *Host) undoStep(ctx context.Context, m *Manifest, s Step, keep bool, kept *[]string) error {
	now, err := h.now(ctx, s)
	if err != nil {
		return err
	}
	skip, refusal := h.undoCheck(m, s, now)
	if refusal != nil {
		if !keep {
			return refusal
		}
		// A connection kept as not the one Barn added (renamed, or another
		// under Barn's name) is no longer claimed: its UUID leaves the
		// ledger, so no later install deletes it as a leftover.
		if s.Kind == KindNMAdd && m.Created.NMConnection != nil {
			if err := h.ledgerSettle(m.Created.NMConnection.UUID, true); err != nil {
				return err
			}
		}
		if msg := keptNote(refusal); !slices.Contains(*kept, msg) {
			*kept = append(*kept, msg)
		}
		return nil
	}
	if skip {
		return nil
	}
	switch s.Kind {
	case KindManifest:
		if err := os.Remove(h.ManifestPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if _, err := h.releaseStateDir(); err != nil {
			return err
		}
	case KindBridgeAdd:
		if err := h.refuseActiveOn(ctx, s.Link); err != nil {
			return err
		}
		return h.Link.DelLinkIndex(h.judgeBridge(m.Created.Bridge, s.Link, now.links).Link.Index)
	case KindNetworkdReload:
		if err := h.refuseActiveOn(ctx, s.Link); err != nil {
			return err
		}
		return h.command(ctx, "networkctl", "delete", strconv.Itoa(h.judgeBridge(m.Created.Bridge, s.Link, now.links).Link.Index))
	case KindAddrAdd:
		return h.Link.DelAddr(s.Link, s.Address)
	case KindNMAdd:
		mac := ""
		if m.Created.Bridge != nil {
			mac = m.Created.Bridge.MAC
		}
		if err := h.removeNMConnection(ctx, m.Created.NMConnection.UUID, s.Link, mac); err != nil {
			return err
		}
		if zoned(s) {
			if err := h.releaseTrustedZone(ctx, s.Link, m.Prestate.FirewalldZone); err != nil {
				return err
			}
			return h.restoreZone(ctx, s.Link, m.Prestate.FirewalldZone)
		}
	case KindUnitStart:
		if err := h.command(ctx, "systemctl", "stop", s.Unit); err != nil {
			return err
		}
		return h.removeRuntimeState(ctx, s)
	case KindUnitEnable:
		return h.command(ctx, "systemctl", "disable", s.Unit)
	case KindMkdir:
		if err := os.Remove(s.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	case KindWriteFile:
		if s.Prev == nil || !s.Prev.Exists {
			if err := os.Remove(s.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			return nil
		}
		mode, err := parseMode(s.Prev.Mode)
		if err != nil {
			return err
		}
		if err := writeAtomic(s.Path, []byte(s.Prev.Content), mode); err != nil {
			return err
		}
		return os.Lchown(s.Path, s.Prev.UID, s.Prev.GID)
	case KindChmod:
		cur, err := StatFile(s.Path, false)
		if err != nil {
			return err
		}
		if cur.Exists && cur.Mode == s.Mode && s.Prev != nil {
			mode, err := parseMode(s.Prev.Mode)
			if err != nil {
				return err
			}
			return chmodRaw(s.Path, mode)
		}
	case KindCommand:
		if len(s.UndoArgv) > 0 {
			return h.command(ctx, s.UndoArgv...)
		}
	}
	return nil
}

// removeRuntimeState removes the files under the directory of a
// unit-start step's Path when Path (networkd's netif state file) was
// recorded absent before install, once the unit and its service are
// inactive again; the directories (made by tmpfiles.d at boot) stay.
func (h *Host) removeRuntimeState(ctx context.Context, s Step) error {
	if s.Path == "" || s.Prev == nil || s.Prev.Exists {
		return nil
	}
	for _, u := range []string{s.Unit, networkdService} {
		if st, err := h.unitState(ctx, "is-active", u); err != nil || st == "active" {
			return err // running again: its state is in use
		}
	}
	return filepath.WalkDir(filepath.Dir(s.Path), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return os.Remove(p)
	})
}

// chmodRaw sets the full mode including setuid/setgid/sticky bits.
func chmodRaw(path string, mode uint32) error {
	if err := syscall.Chmod(path, mode); err != nil {
		return &fs.PathError{Op: "chmod", Path: path, Err: err}
	}
	return nil
}
