// Package inventory reads a Pigsty (Ansible YAML) inventory exactly as
// Ansible reads it and resolves it into Barn's resolved spec (barn.spec/v1,
// package spec).
//
// # What is read
//
// The inventory file (Open; or every file of an inventory directory, as
// `ansible-inventory -i DIR` parses them: by name, recursively, skipping
// Ansible's IGNORED names) and, beside it, group_vars/ and host_vars/ as
// Ansible's host_group_vars plugin finds them (DataLoader.find_vars_files):
// for each group or host NAME the first of NAME, NAME.yml, NAME.yaml,
// NAME.json that exists; a directory is read file by file in name order,
// recursively, skipping hidden files, ~ backups and other extensions. Every
// file is tried as JSON first (Python's json.loads) and then as one YAML
// document, as Ansible's from_yaml does; scalars are read as PyYAML reads
// them (YAML 1.1, package yaml11). An inventory on stdin has no directory
// and no vars files (see Stdin). Symlinks are followed as Ansible follows
// them: a linked inventory file is read with the group_vars/ and
// host_vars/ beside the link.
//
// Ansible constructs every file it reads whole before it looks at a group,
// so a value nobody consumes still fails the inventory when PyYAML cannot
// build it. loader.go finds every such failure in every node of every file
// (dates out of range, explicit tags PyYAML cannot build or does not know,
// an anchor defined twice, an alias inside its own anchor, unhashable
// keys, merge keys of scalars) and refuses the file with PyYAML's error.
// Host keys expand by Ansible's exact range rules (hostrange.go), and
// names are looked up as Ansible does: top-level groups without all:,
// `vars: NAME` as {NAME: null}, a host's variables going to a group of
// the same name.
//
// Of all that, Barn consumes host keys (IPv4 addresses, Ansible host ranges
// expanded), nodename, pg_cluster, pg_seq, node_admin_username,
// node_admin_uid, admin_ip and exactly ten vm_* keys (ConsumedKeys,
// VMKeys), plus ansible_group_priority for ordering. Everything else is
// opaque: never validated, never hashed; vip_interface and
// pg_vip_interface are read only for warnings.
//
// # Precedence
//
// Every consumed value goes through one resolution, ansible-core 2.14's
// (vars/manager.py VariableManager.get_vars, with the default
// VARIABLE_PRECEDENCE of config/base.yml), written as the data in
// precedence.go. Lowest first, later wins:
//
//  1. all_inventory: all.vars in the inventory;
//  2. groups_inventory: the vars of every other group of the host in the
//     inventory, groups in sort_groups order (inventory/helpers.py): by
//     depth (the longest path from all), then ansible_group_priority (set
//     in the inventory only; 1 by default), then name;
//  3. all_plugins_inventory: group_vars/all beside the inventory (so it
//     beats every group's own vars in the inventory);
//  4. all_plugins_play: group_vars/all beside the playbook;
//  5. groups_plugins_inventory: group_vars/<group>, groups in the same
//     order;
//  6. groups_plugins_play: group_vars/<group> beside the playbook;
//  7. the host's own entries in the inventory;
//  8. host_vars/<host> beside the inventory (and the playbook).
//
// Pigsty's playbooks live in the inventory's directory, so steps 4 and 6
// read the files of steps 3 and 5 again, which changes nothing. Within a
// step, definitions merge in order: the inline ones in parse order (a host
// listed twice, a group defined twice: the one parsed last wins; the
// sections of a group are parsed in the order they are written), files in
// find_vars_files order. Values replace each other whole
// (hash_behaviour=replace, Ansible's default).
//
// # Refusals
//
// Barn follows that order everywhere and refuses only genuine ambiguity
// inside its namespace, where Ansible's answer rests on an accident: sibling
// groups at the same depth and priority setting different values (Ansible's
// pick rests only on group-name order), the same host listed more than once
// with different values, and the same group defined more than once with
// different values. Each refusal names every source with file:line and
// carries Ansible's own pick (Problem.Ansible), computed by the same
// resolution; the differential suite (ansible_test.go, differential_test.go)
// proves those picks, and every value Barn accepts, equal to what
// ansible-inventory reads, on generated inventories of every kind above.
// A priority spelling Barn refuses (0x10) still takes part in every tie
// with Ansible's int() of it. Barn also refuses what Ansible fails on (a
// vars file that is not a mapping, an ansible_group_priority int() rejects),
// what it cannot read the way Ansible would (Ansible Vault files, JSON with
// NaN, inventory scripts and ini files, duplicate YAML keys that Ansible
// resolves with a warning), and consumed values whose YAML 1.1 reading
// differs from how they look, with a hint saying how to write them.
//
// Every failure is an *exitcode.Error of class usage whose Detail is the
// []Problem list of the whole inventory.
package inventory
