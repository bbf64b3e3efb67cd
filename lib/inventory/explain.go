package inventory

import (
	"fmt"
	"io"
	"sort"

	"barn.dev/lib/exitcode"
	"barn.dev/lib/human"
	"barn.dev/lib/spec"
	"barn.dev/lib/wire"
)

// ExplainSchema is the schema of Explanation documents.
const ExplainSchema = "barn.explain/v1"

// Explanation says, for one node, where each consumed value came from and
// what it resolved to.
type Explanation struct {
	Schema   string         `json:"schema"`
	Source   string         `json:"source"`
	Node     string         `json:"node"`
	FQDN     string         `json:"fqdn,omitempty"` // when the nodename is fully qualified
	Address  string         `json:"address"`
	Skipped  bool           `json:"skipped"`
	NameFrom string         `json:"name_from"` // nodename, pg_cluster-pg_seq or address
	Keys     []ExplainedKey `json:"keys"`
}

// ExplainedKey is one consumed key. Origin is where Ansible's value comes
// from: "host" (the host's entry in the inventory), "host_vars" (a
// host_vars file), "all" (all.vars), a group name (its vars in the
// inventory), "group_vars/<group>" (a group_vars file), or "default" when
// no source sets it (then File/Line are empty and Value is ""). File and
// Line locate the value in whichever file it is written.
type ExplainedKey struct {
	Key      string `json:"key"`
	Value    string `json:"value"` // as written
	Resolved any    `json:"resolved"`
	Origin   string `json:"origin"`
	File     string `json:"file,omitempty"`
	Line     int    `json:"line,omitempty"`
	Column   int    `json:"column,omitempty"`
}

// RenderText prints one key per line as an aligned table: key, origin and
// file:line, value → resolved (vm_mem and vm_disk in binary units).
func (e *Explanation) RenderText(w io.Writer) error {
	state := ""
	if e.Skipped {
		state = " (vm_skip)"
	}
	if _, err := fmt.Fprintf(w, "%s %s%s: name from %s\n", e.Node, e.Address, state, e.NameFrom); err != nil {
		return err
	}
	tw := human.Table(w)
	for _, k := range e.Keys {
		where := k.Origin
		if k.File != "" {
			where = fmt.Sprintf("%s %s:%d", k.Origin, k.File, k.Line)
		}
		val := k.Value
		if val == "" {
			val = "-"
		}
		resolved := fmt.Sprint(k.Resolved)
		if (k.Key == "vm_image" || k.Key == "vm_version") && k.Resolved == DefaultImage {
			resolved = "the active catalog's default image (barn-plan resolves it)"
		}
		switch v := k.Resolved.(type) {
		case string, bool, int:
		case int64:
			if k.Key == "vm_mem" || k.Key == "vm_disk" { // bytes
				resolved = human.Size(v)
			}
		default: // lists and structs read best as the JSON they are emitted as
			if b, err := wire.Marshal(k.Resolved); err == nil {
				resolved = string(b)
			}
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s → %s\n", k.Key, where, val, resolved)
	}
	return tw.Flush()
}

// ExplainInput resolves in and explains node, which may be a node name
// (managed or skipped), an FQDN or a host address. The inventory must be
// valid.
func ExplainInput(in *Input, node string) (*Explanation, error) {
	a := analyse(in)
	if !a.r.probs.empty() {
		return nil, errorOf(a.r.probs.sorted(), a.in.Name)
	}
	var hr *hostResult
	var names []string
	for _, h := range a.hosts {
		names = append(names, h.node.Name)
		if h.node.Name == node || h.h.Name == node || (h.node.FQDN != "" && h.node.FQDN == node) {
			hr = h
		}
	}
	if hr == nil {
		sort.Strings(names)
		return nil, exitcode.New(exitcode.Usage, "%s: no node or host %q (nodes: %v)", in.Name, node, names).WithReason("unknown_node")
	}
	var sn *spec.Node
	if !hr.skip {
		sn = a.spec.Node(hr.node.Name)
	}
	e := &Explanation{Schema: ExplainSchema, Source: in.Name, Node: hr.node.Name, FQDN: hr.node.FQDN, Address: hr.h.Name, Skipped: hr.skip, NameFrom: hr.nameFrom, Keys: []ExplainedKey{}}
	nodename := hr.node.Name
	if hr.node.FQDN != "" {
		nodename = hr.node.FQDN
	}
	resolved := map[string]any{
		"nodename": nodename, "pg_cluster": nil, "pg_seq": nil,
		"node_admin_username": hr.user, "node_admin_uid": hr.uid, "vm_skip": hr.skip, "vm_arch": hr.arch,
		"admin_ip": nil,
	}
	if sn != nil {
		resolved["vm_image"] = sn.Image
		resolved["vm_version"] = sn.Image
		resolved["vm_cpu"] = sn.CPUs
		resolved["vm_mem"] = sn.MemoryBytes
		resolved["vm_disk"] = sn.RootDiskBytes
		resolved["vm_disks"] = sn.Disks
		resolved["vm_alias"] = sn.Aliases
		resolved["vm_shares"] = sn.Shares
		if hr.adminIP.IsValid() {
			resolved["admin_ip"] = a.spec.Control
		}
	}
	if hr.nameFrom == "pg_cluster-pg_seq" {
		resolved["pg_cluster"] = hr.node.Name
		resolved["pg_seq"] = hr.node.Name
	}
	for _, k := range ConsumedKeys() {
		ek := ExplainedKey{Key: k, Resolved: resolved[k], Origin: "default"}
		if s := hr.settings[k]; s != nil {
			ek.Value, ek.Origin, ek.File = written(s.Value), s.Origin, s.src.file
			if s.Value != nil {
				ek.Line, ek.Column = s.Value.Line, s.Value.Column
			}
		} else if k == "admin_ip" {
			continue // no default: Barn then picks the lowest managed address
		}
		e.Keys = append(e.Keys, ek)
	}
	return e, nil
}
