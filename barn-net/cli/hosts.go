package cli

import (
	"fmt"
	"io"
	"strings"

	"barn.dev/lib/hostnet"
	"barn.dev/lib/tool"
)

// barn-net owns the hosts integration because, like the bridge, it is a
// root-owned change to a host-global file that must be recorded with its
// prestate and undone exactly; barn-node stays unprivileged and only
// prints the entries (barn-node hosts | sudo barn-net hosts install).
type hostsCmd struct {
	Install   hostsInstallCmd   `cmd:"" aliases:"i" help:"Publish the entries of a barn.hosts/v1 on stdin in Barn's block of /etc/hosts (asks on a terminal)."`
	Uninstall hostsUninstallCmd `cmd:"" aliases:"u" help:"Remove Barn's block and restore the hosts file's prestate (asks on a terminal)."`
}

// HostsDoc is barn.hosts/v1, as barn-node hosts prints it.
type HostsDoc struct {
	Schema  string              `json:"schema"`
	Entries []hostnet.HostEntry `json:"entries"`
}

// HostsResult is barn.net.hosts/v1.
type HostsResult struct {
	Schema  string `json:"schema"`
	Action  string `json:"action"`  // install | uninstall
	Applied bool   `json:"applied"` // false: plan only, or nothing to do
	hostnet.HostsResult
}

// RenderText implements tool.TextRenderer.
func (r HostsResult) RenderText(w io.Writer) error {
	verb := map[bool]string{true: "applied", false: "not applied"}[r.Applied]
	if !r.Changed {
		verb = "nothing to change"
	}
	fmt.Fprintf(w, "hosts %s: %s (%s)\n", r.Action, r.Path, verb)
	if r.Block != "" {
		fmt.Fprint(w, r.Block)
	}
	if r.Action == "uninstall" && r.Applied && r.Restored {
		fmt.Fprintln(w, "the file is byte-for-byte as before Barn")
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}

type hostsInstallCmd struct {
	Yes bool `short:"y" help:"Apply without asking."`
}

func (c *hostsInstallCmd) Run(env *tool.Env) error {
	var doc HostsDoc
	if err := env.ReadDocument(env.In, "stdin", "barn.hosts/v1", &doc); err != nil {
		return err
	}
	h, unlock, err := lockedHost(env)
	if err != nil {
		return err
	}
	defer unlock()
	res, err := h.PlanHosts(doc.Entries)
	if err != nil {
		return err
	}
	out := HostsResult{Schema: "barn.net.hosts/v1", Action: "install", HostsResult: res}
	if !res.Changed {
		return env.Emit(out)
	}
	plan := textOf(out)
	if ok, err := confirm(env, c.Yes, true, plan, true, "barn-node hosts | sudo barn-net hosts install --yes"); err != nil || !ok {
		if err != nil {
			return err
		}
		return env.Emit(out)
	}
	if out.HostsResult, err = h.InstallHosts(doc.Entries); err != nil {
		return err
	}
	out.Applied = true
	return env.Emit(out)
}

type hostsUninstallCmd struct {
	Yes bool `short:"y" help:"Remove without asking."`
}

func (c *hostsUninstallCmd) Run(env *tool.Env) error {
	h, unlock, err := lockedHost(env)
	if err != nil {
		return err
	}
	defer unlock()
	res, err := h.UninstallHosts(false)
	if err != nil {
		return err
	}
	out := HostsResult{Schema: "barn.net.hosts/v1", Action: "uninstall", HostsResult: res}
	m, _ := h.ReadHostsManifest()
	if m == nil {
		return env.Emit(out)
	}
	if ok, err := confirm(env, c.Yes, false, textOf(out), false, "sudo barn-net hosts uninstall --yes"); err != nil || !ok {
		if err != nil {
			return err
		}
		return env.Emit(out)
	}
	if out.HostsResult, err = h.UninstallHosts(true); err != nil {
		return err
	}
	out.Block, out.Applied = "", true
	return env.Emit(out)
}

func textOf(r tool.TextRenderer) string {
	var b strings.Builder
	_ = r.RenderText(&b)
	return b.String()
}
