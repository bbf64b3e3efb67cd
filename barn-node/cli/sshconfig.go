package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/guest"
	"barn.dev/lib/inventory"
	"barn.dev/lib/lifecycle"
	"barn.dev/lib/sshkeys"
	"barn.dev/lib/tool"
)

type sshConfigCmd struct {
	Install   bool     `short:"i" help:"Write ~/.ssh/<name>_config and insert a marked Include into ~/.ssh/config."`
	Remove    bool     `help:"Remove the marked Include and the fragment (needs no deployment)."`
	Name      string   `default:"barn" help:"Fragment name: ~/.ssh/<name>_config."`
	Ansible   bool     `help:"Print an Ansible inventory of connection variables keyed by each node's inventory address, in the group barn_lab (use after -i pigsty.yml; its header gives the commands)."`
	Via       string   `default:"private" enum:"private,management" help:"With --ansible: connect to each node's private address on port 22 (private) or to its management port forward on 127.0.0.1 (management)."`
	Exclude   []string `name:"exclude" placeholder:"NAME" help:"Leave NAME (a node name, FQDN or alias) out of the fragment, for a name your own ssh configuration keeps; repeatable."`
	Inventory string   `name:"inventory" short:"f" placeholder:"PATH" help:"With --ansible: the Pigsty inventory the export goes with, whose host_vars/ are checked for connection variables that would outrank it (default: the inventory the deployment was resolved from)."`
	Playbooks []string `name:"playbook-dir" placeholder:"DIR" help:"With --ansible: a directory of playbooks you run with the export; its host_vars/ are checked too (the working directory always is: ad-hoc ansible reads host_vars/ there); repeatable."`
}

// SSHConfigDoc is barn.ssh-config/v1.
type SSHConfigDoc struct {
	Schema    string               `json:"schema"`
	Action    string               `json:"action"` // print, install, remove, ansible
	Fragment  string               `json:"fragment"`
	Include   string               `json:"include"`
	Config    string               `json:"config"`  // the rendered fragment or inventory text
	Entries   []guest.HostEntry    `json:"entries"` // empty for remove
	Installed *guest.InstallResult `json:"installed,omitempty"`
	Removed   *guest.RemoveResult  `json:"removed,omitempty"`
	// Rerouted are the user's blocks for every name (Host *, Match all,
	// a Match on user or exec) that sent a node's name elsewhere before
	// the install, each with where: Barn's block now answers for it.
	Rerouted []guest.Shadow `json:"rerouted,omitempty"`
}

// RenderText prints the fragment (or inventory) itself, or a summary.
func (d SSHConfigDoc) RenderText(w io.Writer) error {
	var err error
	switch d.Action {
	case "print", "ansible":
		_, err = io.WriteString(w, d.Config)
	case "install":
		_, err = fmt.Fprintf(w, "fragment %s %s; include %s in %s\n", d.Fragment, d.Installed.FragmentChange, d.Installed.IncludeChange, d.Installed.Config)
	case "remove":
		r := d.Removed
		if !r.FragmentRemoved && !r.IncludeRemoved && r.IncludeLeft == "" {
			_, err = fmt.Fprintf(w, "nothing of Barn's to remove: no fragment %s and no Include of it in %s\n", r.Fragment, r.Config)
			return err
		}
		_, err = fmt.Fprintf(w, "fragment removed: %v; include removed: %v\n", r.FragmentRemoved, r.IncludeRemoved)
		if r.IncludeLeft != "" {
			fmt.Fprintf(w, "left the Include you added at %s (Barn does not edit a linked config; it matches nothing now): delete that line when you like\n", r.IncludeLeft)
		}
		for _, p := range d.Removed.CreatedRemoved {
			fmt.Fprintf(w, "removed %s (Barn created it; empty now)\n", p)
		}
		for _, p := range d.Removed.CreatedKept {
			fmt.Fprintf(w, "kept %s (Barn created it, but it holds more now)\n", p)
		}
	}
	return err
}

func (c *sshConfigCmd) Run(env *tool.Env) error {
	if err := c.checkFlags(); err != nil {
		return err
	}
	home := env.Getenv("HOME")
	if home == "" {
		return exitcode.New(exitcode.Usage, "HOME is not set").WithReason("home_unset")
	}
	paths := guest.Paths(home, c.Name)
	include, err := paths.IncludeLine()
	if err != nil {
		return err
	}
	doc := SSHConfigDoc{Schema: "barn.ssh-config/v1", Fragment: paths.Fragment, Include: include, Entries: []guest.HostEntry{}}
	if c.Remove {
		res, err := guest.Remove(paths)
		if err != nil {
			return err
		}
		doc.Action, doc.Removed = "remove", &res
		return env.Emit(doc)
	}
	a, err := loadAccess(env)
	if err != nil {
		return err
	}
	doc.Entries = fragmentEntries(a)
	if c.Ansible {
		hosts := c.ansibleHosts(a)
		if err := c.checkAnsibleOverrides(env, a, hosts); err != nil {
			return err
		}
		inv, err := guest.RenderAnsibleInventory(hosts)
		if err != nil {
			return err
		}
		doc.Action, doc.Config = "ansible", string(inv)
		return env.Emit(doc)
	}
	if err := excludeNames(doc.Entries, c.Exclude); err != nil {
		return err
	}
	frag, err := guest.RenderFragment(doc.Entries)
	if err != nil {
		return err
	}
	doc.Config = string(frag)
	if !c.Install {
		doc.Action = "print"
		return env.Emit(doc)
	}
	if err := c.install(env, paths, frag, &doc); err != nil {
		return err
	}
	return env.Emit(doc)
}

// checkFlags refuses the flag combinations that have no meaning.
func (c *sshConfigCmd) checkFlags() error {
	switch {
	case c.Install && c.Remove:
		return exitcode.New(exitcode.Usage, "--install and --remove exclude each other")
	case len(c.Exclude) > 0 && (c.Ansible || c.Remove):
		return exitcode.New(exitcode.Usage, "--exclude shapes the ssh-config fragment; it does not combine with --ansible or --remove")
	case (c.Inventory != "" || len(c.Playbooks) > 0) && !c.Ansible:
		return exitcode.New(exitcode.Usage, "--inventory and --playbook-dir go with --ansible")
	case c.Ansible && (c.Install || c.Remove):
		return exitcode.New(exitcode.Usage, "--ansible prints an inventory; it does not combine with --install or --remove")
	}
	return nil
}

// ansibleHosts are the connection settings of every committed node, by its
// private address or (--via management) its forwarded port.
func (c *sshConfigCmd) ansibleHosts(a *access) []guest.AnsibleHost {
	user := a.dep.Spec.Deployment.User.Name
	var hosts []guest.AnsibleHost
	for _, n := range a.names {
		st := a.nodes[n]
		alias := sshkeys.HostKeyAlias(st.VMUUID)
		h := guest.AnsibleHost{Address: st.Spec.Address, Host: st.Spec.Address, Port: 22, User: user, IdentityFile: a.keys.PrivatePath, KnownHosts: a.keys.KnownHosts, HostKeyAlias: alias}
		if c.Via == "management" {
			h.Host, h.Port = "127.0.0.1", st.SSHPort
		}
		hosts = append(hosts, h)
	}
	return hosts
}

// install checks that ssh parses frag and that no earlier block of the
// user's config claims its names, installs it with its Include, notes the
// names Barn's Include takes out of another route, and records the result
// in doc.
func (c *sshConfigCmd) install(env *tool.Env, paths guest.SSHConfigPaths, frag []byte, doc *SSHConfigDoc) error {
	if err := guest.CheckFragmentParses(env.Ctx, "", frag); err != nil {
		return err
	}
	var names []string
	for _, e := range doc.Entries {
		names = append(names, e.Names()...)
	}
	shadows, err := guest.ShadowedNames(env.Ctx, "", paths, names)
	if err != nil {
		return err
	}
	claimed, routed := guest.SplitShadows(shadows)
	if len(claimed) > 0 {
		return guest.ShadowError(claimed, c.Exclude)
	}
	res, err := guest.Install(paths, frag)
	if err != nil {
		return err
	}
	for _, s := range routed {
		env.Stderrf("note: %s:%d: %s sends %s to %s; Barn's Include now takes %s out of that route (--exclude %s leaves it to you)\n",
			s.File, s.Line, s.Block, s.Name, s.Route, s.Name, s.Name)
	}
	doc.Action, doc.Installed, doc.Rerouted = "install", &res, routed
	return nil
}

// checkAnsibleOverrides refuses the export when the inventory it goes with
// sets, in host_vars/ beside it, beside a --playbook-dir or in the working
// directory, a connection variable the export cannot win over
// (inventory.ConnectionOverrides): Ansible would connect with the user's
// value — another address, port, user, route or key — instead of Barn's.
//
// Settings that change which variables Ansible reads (other vars files
// or plugins: guest.CheckAnsibleVarsSettings, in this environment and
// the ansible.cfg Ansible would read here) are refused first.
func (c *sshConfigCmd) checkAnsibleOverrides(env *tool.Env, a *access, hosts []guest.AnsibleHost) error {
	cwd, err := os.Getwd()
	if err != nil {
		return exitcode.Wrap(exitcode.Runtime, err, "working directory")
	}
	if err := guest.CheckAnsibleVarsSettings(env.Getenv, env.Getenv("HOME"), cwd); err != nil {
		return err
	}
	path := c.Inventory
	if path == "" {
		path = a.dep.Spec.Source.Inventory()
	}
	if path == "" || path == "-" || path == "<stdin>" {
		return exitcode.New(exitcode.Usage, "the deployment records no inventory file, so Barn cannot check that the export wins over its host_vars/").
			WithReason("ansible_inventory_unknown").WithNext("barn-node ssh-config --ansible --inventory PIGSTY_INVENTORY")
	}
	in, err := inventory.Open(path)
	if err != nil {
		if e := exitcode.As(err); e != nil && e.Next == "" {
			return e.WithNext("barn-node ssh-config --ansible --inventory PIGSTY_INVENTORY")
		}
		return err
	}
	addrs := make([]string, len(hosts))
	for i, h := range hosts {
		addrs[i] = h.Address
	}
	for _, d := range c.Playbooks {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			return exitcode.New(exitcode.Usage, "--playbook-dir %s is not a directory", d).WithReason("playbook_dir_missing").
				WithNext("barn-node ssh-config --ansible --playbook-dir DIR   # the directory holding your playbooks")
		}
	}
	var over []inventory.Problem
	for _, at := range inventory.BesideDirs(in, append(slices.Clone(c.Playbooks), ".")) {
		found, err := inventory.ConnectionOverrides(at, addrs, guest.AnsibleDecidingVars())
		if err != nil {
			return err
		}
		over = append(over, found...)
	}
	if len(over) == 0 {
		return nil
	}
	var each []string
	for _, o := range over {
		each = append(each, fmt.Sprintf("%s:%d: host %s %s", o.File, o.Line, o.Host, o.Key))
	}
	msg := "host_vars/ outranks the export's host entries, so Ansible would connect with these values, not Barn's: " + strings.Join(each, ", ")
	return exitcode.New(exitcode.Conflict, "%s", msg).WithReason("ansible_var_outranks_export").WithDetail(over).
		WithNext(over[0].Hint)
}

// excludeNames marks each of names excluded in the entry that has it; a
// name no entry has is a usage error.
func excludeNames(entries []guest.HostEntry, names []string) error {
	for _, n := range names {
		found := false
		for i, e := range entries {
			if e.Node == n || slices.Contains(e.Aliases, n) {
				entries[i].Excluded, found = append(entries[i].Excluded, n), true
			}
		}
		if !found {
			return exitcode.New(exitcode.Usage, "--exclude %s: no node has that name, FQDN or alias", n).WithReason("unknown_node").WithNext("barn-node ssh-config   # prints every name the fragment adds")
		}
	}
	return nil
}

// fragmentEntries are the ssh-config fragment's entries for the committed
// nodes of a.
func fragmentEntries(a *access) []guest.HostEntry {
	out := []guest.HostEntry{}
	for _, n := range a.names {
		st := a.nodes[n]
		out = append(out, guest.HostEntry{Node: n, Aliases: append([]string{}, st.Spec.Aliases...), Address: st.Spec.Address,
			Port: st.SSHPort, User: a.dep.Spec.Deployment.User.Name, IdentityFile: a.keys.PrivatePath, KnownHosts: a.keys.KnownHosts,
			HostKeyAlias: sshkeys.HostKeyAlias(st.VMUUID)})
	}
	return out
}

// refreshFragment keeps an installed ~/.ssh/barn_config true after an
// operation changed what it says (recreate: a new host key alias; a start
// that moved a management port; destroy and purge: nodes gone): it is
// rendered again from the committed state, with the names it answers for
// now (so --exclude stays applied), and rewritten when Barn sealed it.
// The outcome is a note on res; where it cannot be refreshed, the note
// names the one command that does. Nothing installed: nothing to do.
func refreshFragment(env *tool.Env, res *lifecycle.Result) {
	home := env.Getenv("HOME")
	if res == nil || home == "" {
		return
	}
	paths := guest.Paths(home, "")
	installed, err := guest.FragmentNames(paths)
	if err != nil || installed == nil {
		return
	}
	entries := []guest.HostEntry{}
	if a, err := loadAccess(env); err == nil {
		entries = fragmentEntries(a)
	} else if exitcode.As(err).Reason != "no_deployment" && !errors.Is(err, fs.ErrNotExist) {
		res.Notes = append(res.Notes, fmt.Sprintf("%s was not refreshed (%v); next: barn-node ssh-config --install", paths.Fragment, err))
		return
	}
	for i, e := range entries {
		for _, n := range append([]string{e.Node}, e.Aliases...) {
			if !slices.Contains(installed, n) {
				entries[i].Excluded = append(entries[i].Excluded, n)
			}
		}
	}
	frag, err := guest.RenderFragment(entries)
	var change string
	if err == nil {
		change, err = guest.Refresh(paths, frag)
	}
	switch {
	case err != nil:
		res.Notes = append(res.Notes, fmt.Sprintf("%s is stale and was not refreshed (%s); next: barn-node ssh-config --install", paths.Fragment, exitcode.As(err).Message))
	case change == "updated":
		res.Notes = append(res.Notes, "refreshed "+paths.Fragment+" (host key aliases and ports as committed now)")
	}
}
