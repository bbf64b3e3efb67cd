// Package lifecycle is barn-node's orchestration: apply a barn.plan/v1
// (create and start nodes), start, stop, restart, status (live audit and
// convergence), recreate, destroy and purge, the journal-driven prepare and
// rollback, and management SSH port allocation.
//
// It owns no host mechanism itself: the VM layer (launch, stop ladder,
// audit), the emulator profile and invocation, image bytes, the NoCloud
// seed, the network preflight and guest readiness are reached through the
// small interfaces in deps.go, bound to the real packages by Real (real.go)
// and to fakes in tests. Every file under BARN_HOME goes through
// *state.Root; disks through package disk.
//
// Rules kept here (design notes 3 and 4):
//   - desired state authorizes creation, never destruction by omission:
//     recreate and missing outcomes are refused by Apply;
//   - a journal describes work before state exists: a crash before commit
//     leaves a bounded list of artifacts that rollback removes in reverse
//     order, and only those;
//   - a PID is not a VM: every stop goes through the VM layer's verified
//     ladder, and a recorded PID proven foreign means the VM is stopped.
package lifecycle
