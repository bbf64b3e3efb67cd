// Package inventory reads a Pigsty (Ansible YAML) inventory and resolves it
// into Barn's resolved spec (barn.spec/v1, package spec).
//
// What is read: host keys (IPv4 addresses, Ansible host ranges expanded),
// nodename, pg_cluster, pg_seq, admin_ip (all.vars only),
// node_admin_username, node_admin_uid and exactly ten vm_* keys (see
// VMKeys). Everything else is opaque: never validated, never hashed.
// Consumed values are read as Ansible reads them (YAML 1.1, package
// yaml11) or refused with a hint saying how to write them unambiguously.
//
// Precedence follows Ansible: all.vars (depth 0) < children.<g>.vars
// (depth = longest nesting path from all) < host vars. Two different
// values at the same depth from different groups are an error (Ansible
// would silently pick the alphabetically last group).
//
// Every failure is an *exitcode.Error of class usage whose Detail is the
// []Problem list of the whole file.
package inventory
