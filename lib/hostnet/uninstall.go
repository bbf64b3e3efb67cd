package hostnet

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"barn.dev/lib/exitcode"
)

// PlanUninstall returns the uninstall plan (the applied steps' undos in
// reverse) or refuses: conflict "bridge_in_use" while any link is attached
// to the bridge; integrity "owned_file_modified" when a file Barn wrote no
// longer has the digest recorded at install. With no manifest it returns a
// Noop plan.
func (h *Host) PlanUninstall(o Observed) (Plan, error) {
	m := o.Manifest
	p := Plan{Schema: PlanSchema, Action: "uninstall", Bridge: h.bridge(), Manifest: h.ManifestPath(), Helper: h.Helper,
		Verified: true, Notes: []string{}, Steps: []Step{}}
	if m == nil {
		p.Noop = true
		p.Notes = append(p.Notes, "no manifest at "+h.ManifestPath()+": Barn installed nothing here, so nothing is removed")
		return p, nil
	}
	p.Backend, p.Bridge, p.CIDR, p.HostAddress, p.Helper = m.Backend, m.Bridge, m.CIDR, m.HostAddress, m.Helper
	if att := o.Attached(m.Bridge); len(att) > 0 {
		return p, exitcode.New(exitcode.Conflict, "bridge %s still has attached links (%s); stop the VMs that use it first", m.Bridge, strings.Join(att, ", ")).
			WithReason("bridge_in_use").WithNext("barn-node status").WithDetail(att)
	}
	for _, s := range m.Steps[:m.Applied] {
		if s.Kind != KindWriteFile {
			continue
		}
		cur, err := StatFile(s.Path, false)
		if err != nil {
			return p, exitcode.Wrap(exitcode.Runtime, err, "checking %s", s.Path)
		}
		if want := digest([]byte(s.Content)); cur.SHA256 != want {
			return p, exitcode.New(exitcode.Integrity, "%s was modified since install (sha256 %s, recorded %s); Barn does not overwrite a changed file — restore Barn's content or undo the edit",
				s.Path, short(cur.SHA256), short(want)).WithReason("owned_file_modified").WithDetail(map[string]string{"path": s.Path})
		}
	}
	for j := m.Applied - 1; j >= 0; j-- {
		s := m.Steps[j]
		if sum := undoSummary(s); sum != "" {
			u := s
			u.Summary = sum
			p.add(u)
		}
	}
	return p, nil
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
		return "delete bridge " + s.Link
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
// checks, restoring the prestate exactly. It returns the executed plan.
func (h *Host) Uninstall(ctx context.Context, progress Progress) (Plan, error) {
	if progress == nil {
		progress = func(string) {}
	}
	o, err := h.Inspect(ctx)
	if err != nil {
		return Plan{}, exitcode.Wrap(exitcode.Runtime, err, "inspecting the host")
	}
	p, err := h.PlanUninstall(o)
	if err != nil || p.Noop {
		return p, err
	}
	for i, s := range p.Steps {
		progress(fmt.Sprintf("[%d/%d] %s", i+1, len(p.Steps), s.Summary))
	}
	if err := h.undoApplied(ctx, o.Manifest); err != nil {
		return p, exitcode.Wrap(exitcode.Runtime, err, "uninstall stopped").WithReason("uninstall_failed").WithNext("barn-net status")
	}
	if _, err := os.Lstat(h.StateDir); errors.Is(err, fs.ErrNotExist) {
		progress("removed " + h.StateDir + " (Barn created it for its manifests)")
	}
	return p, nil
}
