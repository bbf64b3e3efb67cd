# crash.sh — kill barn-net (BARN_NET_TEST_CRASH_AFTER) right after each step
# of install and of uninstall, then follow the printed hints; each crash
# leaves ci-<step>.snap (install killed) or cu-<step>.snap (uninstall
# killed) for the Go test to compare with crash-before, taken first: the
# host as before, so nothing left for an uninstall to refuse.
crash_every_step() {
  flags=$1
  snap crash-before
  step crash-plan barn-net plan $flags
  for id in $(plan_ids "$OUT/crash-plan.out"); do
    step "ci-$id" env BARN_NET_TEST_CRASH_AFTER="install:$id" barn-net install --yes $flags
    step "ci-$id-again" barn-net install --yes $flags
    follow "ci-$id-again"
    snap "ci-$id"
    step "cu-$id-install" barn-net install --yes $flags
    step "cu-$id" env BARN_NET_TEST_CRASH_AFTER="uninstall:$id" barn-net uninstall --yes
    step "cu-$id-again" barn-net uninstall --yes
    snap "cu-$id"
  done
  plan_ids "$OUT/crash-plan.out" > "$OUT/crash-ids"
}
