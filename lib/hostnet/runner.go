package hostnet

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
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
	if progress == nil {
		progress = func(string) {}
	}
	if plan.Noop {
		return nil, nil
	}
	if !plan.Verified && runtimeOS != "darwin" {
		return nil, exitcode.New(exitcode.Capability, "the %s backend runs on macOS only; its plan is shown for review", plan.Backend).WithReason("backend_unavailable")
	}
	obs, err := h.Inspect(ctx)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Runtime, err, "re-inspecting the host")
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
	m := &Manifest{Schema: ManifestSchema, Status: StatusInstalling, Backend: plan.Backend, Bridge: plan.Bridge,
		CIDR: plan.CIDR, HostAddress: plan.HostAddress, DHCPEnd: sn.DHCPEnd().String(), Helper: plan.Helper,
		Prestate: Prestate{BridgeConf: obs.BridgeConf, QemuDir: obs.QemuDir, Helper: obs.Helper, Units: obs.Networkd.Units},
		Steps:    plan.Steps, Files: map[string]string{}}
	for i, s := range plan.Steps {
		if err := ctx.Err(); err != nil {
			return nil, h.rollback(m, fmt.Errorf("cancelled before step %d (%s): %w", i+1, s.ID, err), i, s)
		}
		progress(fmt.Sprintf("[%d/%d] %s", i+1, len(plan.Steps), s.Summary))
		err := h.applyStep(ctx, m, &plan, s)
		if err == nil {
			m.Applied = i + 1
			if s.Kind == KindWriteFile {
				m.Files[s.Path] = digest([]byte(s.Content))
			}
			if h.FailAfter == s.ID {
				err = fmt.Errorf("injected failure after step %s", s.ID)
			} else {
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
	class := exitcode.ClassOf(cause)
	if class == exitcode.OK || class == exitcode.Cancelled && !errors.Is(cause, context.Canceled) {
		class = exitcode.Runtime
	}
	if uerr := h.undoApplied(context.Background(), m); uerr != nil {
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
// manifest step is still applied) and returns the error.
func (h *Host) undoApplied(ctx context.Context, m *Manifest) error {
	for j := m.Applied - 1; j >= 0; j-- {
		if err := h.undoStep(ctx, m.Steps[j]); err != nil {
			m.Applied = j + 1
			err = fmt.Errorf("undoing step %d (%s): %w", j+1, m.Steps[j].ID, err)
			if m.Steps[0].Kind == KindManifest {
				if werr := h.writeManifest(m); werr != nil {
					err = errors.Join(err, fmt.Errorf("recording %d step(s) still applied in the manifest: %w", m.Applied, werr))
				}
			}
			return err
		}
		m.Applied = j
		if j > 0 && m.Steps[0].Kind == KindManifest {
			if err := h.writeManifest(m); err != nil {
				return err
			}
		}
	}
	return nil
}

func (h *Host) applyStep(ctx context.Context, m *Manifest, p *Plan, s Step) error {
	switch s.Kind {
	case KindManifest:
		m.Applied = 0
		return h.writeManifest(m)
	case KindBridgeAdd:
		return h.Link.AddBridge(s.Link)
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
		if out, err := h.Runner.Run(ctx, s.Argv); err != nil {
			return fmt.Errorf("%v: %w: %s", s.Argv, err, firstLine(string(out)))
		}
		return nil
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

func (h *Host) undoStep(ctx context.Context, s Step) error {
	switch s.Kind {
	case KindManifest:
		if err := os.Remove(h.ManifestPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if _, err := h.releaseStateDir(); err != nil {
			return err
		}
	case KindBridgeAdd:
		if h.linkExists(s.Link) {
			return h.Link.DelLink(s.Link)
		}
	case KindAddrAdd:
		links, err := h.Link.Links()
		if err != nil {
			return err
		}
		for _, l := range links {
			if l.Name == s.Link && slices.Contains(l.Addrs, s.Address) {
				return h.Link.DelAddr(s.Link, s.Address)
			}
		}
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
			if out, err := h.Runner.Run(ctx, s.UndoArgv); err != nil {
				return fmt.Errorf("%v: %w: %s", s.UndoArgv, err, firstLine(string(out)))
			}
		}
	}
	return nil
}

func (h *Host) linkExists(name string) bool {
	links, err := h.Link.Links()
	if err != nil {
		return true // let DelLink report the real error
	}
	for _, l := range links {
		if l.Name == name {
			return true
		}
	}
	return false
}

// chmodRaw sets the full mode including setuid/setgid/sticky bits.
func chmodRaw(path string, mode uint32) error {
	if err := syscall.Chmod(path, mode); err != nil {
		return &fs.PathError{Op: "chmod", Path: path, Err: err}
	}
	return nil
}
