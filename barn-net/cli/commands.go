package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/hostnet"
	"barn.dev/lib/tool"
)

type cidrFlag struct {
	CIDR string `name:"cidr" short:"c" placeholder:"A.B.C.0/24" help:"The deployment's /24 (default: the installed one, else 10.10.10.0/24)."`
}

type backendFlag struct {
	Backend string `name:"backend" default:"auto" enum:"auto,netlink,networkmanager,networkd,vmnet" help:"auto (what owns the host network), netlink, networkmanager, networkd or vmnet."`
}

// host is this machine's Host. The test seam BARN_NET_TEST_CRASH_AFTER=
// <install|uninstall>:<step id> makes barn-net kill itself (SIGKILL) right
// after that step's effect or undo, before the manifest records it: the
// live suite proves with it that every crash converges.
func host(env *tool.Env) *hostnet.Host {
	h := hostnet.FromEnv(env.Getenv)
	if at := env.Getenv("BARN_NET_TEST_CRASH_AFTER"); at != "" {
		h.CrashAfter = func(phase, step string) {
			if phase+":"+step == at {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal is delivered before anything else runs
			}
		}
	}
	return h
}

// lockedHost is host(env) holding the network lock, for the commands that
// change the host; the caller defers the release.
func lockedHost(env *tool.Env) (*hostnet.Host, func(), error) {
	h := host(env)
	unlock, err := h.LockNetwork()
	return h, unlock, err
}

type statusCmd struct{ cidrFlag }

func (c *statusCmd) Run(env *tool.Env) error {
	s, err := host(env).Status(env.Ctx, c.CIDR)
	if err != nil {
		return asError(err, "inspecting the host network")
	}
	return env.Emit(s)
}

type planCmd struct {
	cidrFlag
	backendFlag
	Propose bool `help:"Print the first free /24 from the fixed candidate list instead of a plan."`
}

// Proposal is the output of plan --propose.
type Proposal struct {
	Schema     string   `json:"schema"`
	CIDR       string   `json:"cidr"` // "" when every candidate is taken
	Candidates []string `json:"candidates"`
	InUse      []string `json:"in_use"`
}

// RenderText implements tool.TextRenderer.
func (p Proposal) RenderText(w io.Writer) error {
	if p.CIDR == "" {
		_, err := fmt.Fprintf(w, "no free /24 among %s\n", strings.Join(p.Candidates, ", "))
		return err
	}
	_, err := fmt.Fprintf(w, "%s\n", p.CIDR)
	return err
}

func (c *planCmd) Run(env *tool.Env) error {
	h := host(env)
	o, err := h.Inspect(env.Ctx)
	if err != nil {
		return asError(err, "inspecting the host network")
	}
	if c.Propose {
		used := []string{}
		for _, p := range o.InUse() {
			used = append(used, p.String())
		}
		cidr, ok := hostnet.Propose(o.InUse())
		doc := Proposal{Schema: "barn.net.proposal/v1", CIDR: cidr, Candidates: hostnet.Candidates, InUse: used}
		if err := env.Emit(doc); err != nil {
			return err
		}
		if !ok {
			return exitcode.New(exitcode.Resource, "every candidate /24 is in use on this host").WithReason("no_free_subnet")
		}
		return nil
	}
	p, err := h.PlanInstall(o, hostnet.Options{CIDR: cidrOf(c.CIDR, o), Backend: c.Backend})
	if err != nil {
		return err
	}
	return env.Emit(p)
}

// cidrOf defaults to the installed network's cidr.
func cidrOf(flag string, o hostnet.Observed) string {
	if flag == "" && o.Manifest != nil {
		return o.Manifest.CIDR
	}
	return flag
}

// Result is what install and uninstall print.
type Result struct {
	Schema  string       `json:"schema"`
	Action  string       `json:"action"`
	Applied bool         `json:"applied"` // false: plan printed only, or nothing to do
	Plan    hostnet.Plan `json:"plan"`
}

// RenderText implements tool.TextRenderer.
func (r Result) RenderText(w io.Writer) error {
	if err := r.Plan.RenderText(w); err != nil {
		return err
	}
	state := "not applied (plan only)"
	switch {
	case r.Applied:
		state = "applied"
	case r.Plan.Noop:
		state = "nothing to do"
	}
	_, err := fmt.Fprintf(w, "%s: %s\n", r.Action, state)
	return err
}

type installCmd struct {
	cidrFlag
	backendFlag
	Yes bool `short:"y" help:"Apply without asking."`
}

func (c *installCmd) Run(env *tool.Env) error {
	h, unlock, err := lockedHost(env)
	if err != nil {
		return err
	}
	defer unlock()
	o, err := h.Inspect(env.Ctx)
	if err != nil {
		return asError(err, "inspecting the host network")
	}
	opt := hostnet.Options{CIDR: cidrOf(c.CIDR, o), Backend: c.Backend}
	p, err := h.PlanInstall(o, opt)
	if err != nil {
		return err
	}
	res := Result{Schema: "barn.net.result/v1", Action: "install", Plan: p}
	if p.Noop {
		env.Stderrf("barn-net: %s is already installed on %s and ready; nothing to do", p.CIDR, p.Bridge)
		return env.Emit(res)
	}
	if ok, err := confirm(env, c.Yes, false, textOf(p), true, "barn-net install --yes"); err != nil || !ok {
		if err != nil {
			return err
		}
		return env.Emit(res)
	}
	progress := func(s string) { env.Stderrf("%s", s) }
	if c.Yes {
		_, err = h.ApplyInspected(env.Ctx, o, p, opt, progress)
	} else {
		_, err = h.Apply(env.Ctx, p, opt, progress) // asked: the host may have changed meanwhile
	}
	if err != nil {
		return err
	}
	res.Applied = true
	return env.Emit(res)
}

type uninstallCmd struct {
	Yes bool `short:"y" help:"Remove without asking."`
}

func (c *uninstallCmd) Run(env *tool.Env) error {
	h, unlock, err := lockedHost(env)
	if err != nil {
		return err
	}
	defer unlock()
	o, err := h.Inspect(env.Ctx)
	if err != nil {
		return asError(err, "inspecting the host network")
	}
	p, err := h.PlanUninstall(o)
	if err != nil {
		return err
	}
	res := Result{Schema: "barn.net.result/v1", Action: "uninstall", Plan: p}
	if p.Noop {
		env.Stderrf("barn-net: no Barn network is installed (no manifest at %s); nothing to do", h.ManifestPath())
		return env.Emit(res)
	}
	if ok, err := confirm(env, c.Yes, false, textOf(p), false, "barn-net uninstall --yes"); err != nil || !ok {
		if err != nil {
			return err
		}
		return env.Emit(res)
	}
	progress := func(s string) { env.Stderrf("%s", s) }
	if c.Yes {
		_, err = h.UninstallInspected(env.Ctx, o, progress)
	} else {
		_, err = h.Uninstall(env.Ctx, progress) // asked: the host may have changed meanwhile
	}
	if err != nil {
		return err
	}
	res.Applied = true
	return env.Emit(res)
}

// confirm shows the plan and decides whether to apply it: --yes applies; a
// person at a terminal (stdin, else the controlling terminal) is asked
// ([Y/n] for install, [y/N] for uninstall); with nobody to ask the plan is
// printed only, with next: <again>.
func confirm(env *tool.Env, yes, stdinTaken bool, plan string, defaultYes bool, again string) (bool, error) {
	if yes {
		return true, nil
	}
	question := plan + "Apply? [y/N] "
	if defaultYes {
		question = plan + "Apply? [Y/n] "
	}
	answer, asked := env.Ask(stdinTaken, question)
	if !asked {
		env.Stderrf("%s: plan only (no terminal and no --yes); nothing changed", env.Tool)
		env.Stderrf("next: %s", again)
		return false, nil
	}
	switch strings.ToLower(answer) {
	case "y", "yes":
		return true, nil
	case "":
		if defaultYes {
			return true, nil
		}
	}
	return false, exitcode.New(exitcode.Cancelled, "declined; nothing changed").WithReason("declined")
}

type preflightCmd struct {
	cidrFlag
	Bridge string `help:"Bridge name (default: BARN_BRIDGE or barn0)."`
}

func (c *preflightCmd) Run(env *tool.Env) error {
	h := host(env)
	cidr := c.CIDR
	if cidr == "" {
		if m, err := h.ReadManifest(); err == nil && m != nil {
			cidr = m.CIDR
		}
	}
	r, err := h.Preflight(env.Ctx, cidr, c.Bridge)
	if err != nil {
		return err
	}
	return env.Emit(r)
}

// asError keeps a classified error and wraps an unclassified one as runtime.
func asError(err error, what string) error {
	if e := exitcode.As(err); e.Class != exitcode.Runtime {
		return e
	}
	return exitcode.Wrap(exitcode.Runtime, err, "%s", what)
}
