// Package doctor is Barn's read-only capability report, as Barn 0.9's
// `doctor` (reference behaviour §6.4): can this host run a lab now, and if
// not, what exactly is missing and which one action fixes it.
//
// It checks the host, the QEMU binary and version, the accelerator proven
// by a real smoke start, the machine, CPU models, devices and netdevs the
// invocation uses, qemu-bridge-helper, qemu-img, UEFI firmware, ssh (and
// ssh-keygen, a warning only), the private network (what `barn-net
// preflight` reports, from lib/hostnet) and the state root. It changes nothing: the only processes it starts are
// QEMU queries (`-machine help`, …), a paused smoke start that is killed,
// and `--version`s.
//
// Each check has a class: "capability" (needed to launch a node: an error
// makes the report unusable and barn-node doctor exit 3) or "network" (the
// host network, which `barn-net install` sets up: reported, but as in
// Barn 0.9 never a reason for exit 3 on its own).
package doctor

import (
	"context"
	"fmt"
	"io"
	"strings"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/human"
)

// Schema is the report's schema.
const Schema = "barn.doctor/v1"

// Check statuses.
const (
	OK    = "ok"
	Warn  = "warn"
	Error = "error"
)

// Check classes.
const (
	ClassCapability = "capability"
	ClassNetwork    = "network"
)

// Check is one observed fact.
type Check struct {
	Name     string `json:"name"`     // e.g. "qemu", "kvm-real-smoke", "firmware"
	Status   string `json:"status"`   // ok, warn or error
	Class    string `json:"class"`    // capability or network
	Evidence string `json:"evidence"` // what was observed (paths, versions, messages)
	Fix      string `json:"fix"`      // the one action that fixes a warn or error; "" when ok
}

// Report is barn.doctor/v1.
type Report struct {
	Schema string `json:"schema"`
	OS     string `json:"os"`
	Arch   string `json:"arch"`
	// Accelerator is what barn-node apply would use now: "kvm", "tcg", or
	// "" when none is usable.
	Accelerator string `json:"accelerator"`
	// Usable: no capability check is an error.
	Usable bool `json:"usable"`
	// ForeignArchs are the guest architectures other than the host's that
	// this host can run under TCG, each proven by a paused smoke start
	// (check foreign-archs).
	ForeignArchs []string `json:"foreign_archs"`
	Checks       []Check  `json:"checks"`
}

// Err is nil for a usable report, else a capability error (exit 3, reason
// capability_missing) naming the failed capability checks, with the first
// one's fix as next. Network errors alone never make it fail.
func (r *Report) Err() error {
	var names []string
	next := ""
	for _, c := range r.Checks {
		if c.Status == Error && c.Class == ClassCapability {
			names = append(names, c.Name)
			if next == "" {
				next = c.Fix
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	return exitcode.New(exitcode.Capability, "this host cannot run Barn nodes yet: %s", strings.Join(names, ", ")).
		WithReason("capability_missing").WithNext(next)
}

// RenderText is the --text view: one aligned row per check (STATUS, CHECK,
// EVIDENCE), each warn or error followed by its fix, then the verdict.
func (r *Report) RenderText(w io.Writer) error {
	tw := human.Table(w)
	fmt.Fprintln(tw, "STATUS\tCHECK\tEVIDENCE")
	for _, c := range r.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Status, c.Name, c.Evidence)
		if c.Status != OK && c.Fix != "" {
			fmt.Fprintf(tw, "\t\tfix: %s\n", c.Fix)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	verdict := "usable: every capability Barn needs is present"
	if !r.Usable {
		verdict = "not usable: fix the capability errors above"
	}
	if r.Accelerator == "tcg" {
		verdict += "; TCG (software emulation): performance figures are not meaningful"
	}
	for _, c := range r.Checks {
		if c.Status == Error && c.Class == ClassNetwork {
			verdict += "; the private network is not ready (barn-net install)"
			break
		}
	}
	_, err := fmt.Fprintf(w, "%s/%s: %s\n", r.OS, r.Arch, verdict)
	return err
}

// add appends a check.
func (r *Report) add(name, status, class, evidence, fix string) {
	if status == OK {
		fix = ""
	}
	r.Checks = append(r.Checks, Check{Name: name, Status: status, Class: class, Evidence: evidence, Fix: fix})
}

// Run probes the host and returns the report (never an error: what cannot
// be checked is a check).
func (p *Probe) Run(ctx context.Context) *Report {
	p.defaults()
	r := &Report{Schema: Schema, OS: p.GOOS, Arch: p.GOARCH, Checks: []Check{}, ForeignArchs: []string{}}
	p.host(r)
	if bin := p.qemu(ctx, r); bin != "" {
		p.version(ctx, r, bin)
		p.accelerator(ctx, r, bin)
		p.machine(ctx, r, bin)
		p.cpu(ctx, r, bin)
		p.devices(ctx, r, bin)
		p.netdevs(ctx, r, bin)
	}
	p.bridgeHelper(r)
	p.qemuImg(ctx, r)
	p.firmware(r)
	p.foreign(ctx, r)
	p.ssh(ctx, r)
	p.sshKeygen(r)
	p.network(ctx, r)
	p.stateRoot(r)
	r.Usable = true
	for _, c := range r.Checks {
		if c.Status == Error && c.Class == ClassCapability {
			r.Usable = false
		}
	}
	return r
}
