package hostnet

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"barn.dev/lib/exitcode"
)

// StatusSchema is the schema of a status document.
const StatusSchema = "barn.net.status/v1"

// Status is the read-only view of the host network.
type Status struct {
	Schema      string    `json:"schema"`
	Backend     string    `json:"backend"`  // detected on this host
	Verified    bool      `json:"verified"` // false for a backend only planned here (vmnet)
	Installed   bool      `json:"installed"`
	Manifest    string    `json:"manifest"`
	State       string    `json:"state"` // manifest status, "" when not installed
	Bridge      string    `json:"bridge"`
	CIDR        string    `json:"cidr"`
	HostAddress string    `json:"host_address"`
	Helper      FileState `json:"helper"`
	BridgeConf  FileState `json:"bridge_conf"`
	Attached    []string  `json:"attached"`
	Usable      bool      `json:"usable"`
	Findings    []Finding `json:"findings"`
	Proposed    string    `json:"proposed_cidr,omitempty"` // first free candidate /24 when cidr is in use
	// Faults are the recorded network faults (barn-net fault), with age.
	Faults []FaultView `json:"faults"`
}

// Status inspects without changing anything. cidr "" means the installed
// network's cidr, else DefaultCIDR.
func (h *Host) Status(ctx context.Context, cidr string) (Status, error) {
	o, err := h.Inspect(ctx)
	if err != nil {
		return Status{}, err
	}
	s := Status{Schema: StatusSchema, Backend: o.Detected, Verified: runtimeOS == "linux", Manifest: h.ManifestPath(),
		Bridge: h.bridge(), Attached: o.Attached(h.bridge()), Helper: o.Helper, BridgeConf: o.BridgeConf}
	s.BridgeConf.Content = ""
	if m := o.Manifest; m != nil {
		s.Installed, s.State, s.Bridge = m.Status == StatusInstalled, m.Status, m.Bridge
		s.Attached = o.Attached(m.Bridge)
		if cidr == "" {
			cidr = m.CIDR
		}
	}
	if runtimeOS == "darwin" {
		s.Backend = BackendVmnet
	}
	r, perr := h.Preflight(ctx, or(cidr, DefaultCIDR), s.Bridge)
	if r.Schema == "" {
		return s, perr
	}
	s.CIDR, s.HostAddress, s.Usable, s.Findings = r.CIDR, r.HostAddress, r.Usable, r.Findings
	if o.Manifest != nil {
		s.Findings = append(s.Findings, h.modifiedOwnedFiles(o.Manifest)...)
	}
	s.Faults, err = h.FaultViews(ctx, time.Now())
	if err != nil {
		return s, err
	}
	if s.Manifest != "" && o.Manifest == nil {
		if err := checkSubnetFree(o, mustSubnet(s.CIDR), s.Bridge); err != nil {
			s.Findings = append(s.Findings, Finding{Code: "subnet_in_use", Severity: SevError, Message: err.Error(),
				Fix: "barn-net plan --propose"})
			s.Usable = false
			if p, ok := Propose(o.InUse()); ok {
				s.Proposed = p
			}
		}
	}
	return s, nil
}

// modifiedOwnedFiles returns one warning per file the installation wrote
// that uninstall would refuse to restore (fileUndo: owned_file_modified,
// or installed_after while later installs' blocks follow its own), so
// status shows what blocks uninstall before anyone runs it.
func (h *Host) modifiedOwnedFiles(m *Manifest) []Finding {
	var out []Finding
	for _, st := range m.Steps[:min(m.Applied, len(m.Steps))] {
		if st.Kind != KindWriteFile {
			continue
		}
		if _, refusal := h.fileUndo(st); refusal != nil {
			xe := exitcode.As(refusal)
			out = append(out, Finding{Code: xe.Reason, Severity: SevWarning, Message: xe.Message + "; barn-net uninstall refuses until then", Fix: or(xe.Next, "restore Barn's content of "+st.Path+" or undo the edit")})
		}
	}
	return out
}

// RenderText implements the --text view.
func (s Status) RenderText(w io.Writer) error {
	var b strings.Builder
	state := "not installed"
	if s.State != "" {
		state = s.State
	}
	fmt.Fprintf(&b, "backend:     %s", s.Backend)
	if !s.Verified {
		b.WriteString(" (UNVERIFIED on this machine)")
	}
	fmt.Fprintf(&b, "\nnetwork:     %s on %s (host %s), %s\n", s.CIDR, s.Bridge, s.HostAddress, state)
	fmt.Fprintf(&b, "helper:      %s (mode %s)\nbridge.conf: %s\nmanifest:    %s\n", s.Helper.Path, s.Helper.Mode, s.BridgeConf.Path, s.Manifest)
	fmt.Fprintf(&b, "attached:    %s\nusable:      %v\n", strings.Join(s.Attached, ", "), s.Usable)
	for _, f := range s.Findings {
		fmt.Fprintf(&b, "%s %s: %s\n  fix: %s\n", f.Severity, f.Code, f.Message, f.Fix)
	}
	for _, f := range s.Faults {
		state := "enforced"
		if !f.Enforced {
			state = "NOT enforced (" + f.Problem + "); next: " + f.Next
		}
		fmt.Fprintf(&b, "fault %s: %s, age %s, %s\n", f.ID, f.Describe(), time.Duration(f.AgeSeconds)*time.Second, state)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
