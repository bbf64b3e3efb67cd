// Package hostnet installs, inspects and removes the host's private fixed-IP
// network (the bridge barn0 holding the .1 address of the deployment's /24)
// as a reversible transaction.
//
// Every backend (netlink, networkmanager, networkd, vmnet) turns an observed
// host state into a Plan of typed Steps; one Runner applies the steps in
// order and undoes the applied ones in reverse when a step or the readiness
// proof fails. A plan is a pure function of the observed state, so plans are
// golden-tested without applying them.
//
// Paths outside the process (the QEMU bridge ACL, the manifest, the bridge
// helper) live in a Host, so tests and packagers redirect them:
//
//	BARN_NET_ETC     replaces /etc          (bridge.conf at $BARN_NET_ETC/qemu/bridge.conf,
//	                                         networkd units at $BARN_NET_ETC/systemd/network)
//	BARN_NET_STATE   replaces /var/lib/barn (manifest at $BARN_NET_STATE/network.json, 0600;
//	                 the hosts manifest hosts.json and the fault record faults.json
//	                 (fault.go) beside it; when Barn created the
//	                 directory, created.json records it and it goes with the last manifest)
//	BARN_NET_HELPER  the qemu-bridge-helper path (default: the first existing of
//	                 /usr/lib/qemu/qemu-bridge-helper, /usr/libexec/qemu-bridge-helper)
//	BARN_NET_RUN     replaces /run          (systemd detection: $BARN_NET_RUN/systemd/system)
//	BARN_BRIDGE      the bridge name (default barn0)
//	BARN_QEMU        the QEMU binary for the attach proof (default qemu-system-x86_64)
//
// Note: the real qemu-bridge-helper always reads its compiled-in ACL
// /etc/qemu/bridge.conf; redirecting BARN_NET_ETC only makes sense together
// with a private mount namespace (tests) or a packaging root.
//
// Helper permissions: on install Barn sets the setuid bit on the helper with
// chmod (mode |= 04000, owner must already be root) and records the original
// owner, group and mode in the manifest; uninstall restores that mode exactly
// when the helper still has the mode Barn set and bridge.conf allows no
// bridge of another finished install (shared.go: installs of several
// state directories share the helper and bridge.conf, and leave in
// reverse order). A package upgrade that resets
// the mode shows up in Preflight as helper_not_setuid (fix: barn-net install).
// Barn does not use dpkg-statoverride: the override would live in dpkg's
// database, outside the recorded prestate, and could not be redirected in
// tests. An existing statoverride for the helper is left alone and reported.
package hostnet
