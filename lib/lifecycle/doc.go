// Package lifecycle is barn-node's orchestration: apply a barn.plan/v1
// (create and start nodes), start, stop, restart, status (live audit and
// convergence), recreate, destroy and purge, the journal-driven prepare and
// rollback, and management SSH port allocation.
//
// It owns no host mechanism itself: the VM layer (launch, stop ladder,
// audit), the emulator profile and invocation, image bytes, the NoCloud
// seed, the network preflight and guest readiness are reached through the
// small interfaces in deps.go, bound to the real packages by Real (real.go)
// and to fakes in tests. It makes no file calls under BARN_HOME itself:
// documents go through *state.Root, and every file of nodes/<node>/ and
// disks/<node>/ — the write-ahead journal, the destroy transaction, the
// ownership proofs — through lib/nodedir, which it hands its step hook
// (crash injection) and progress stream.
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
