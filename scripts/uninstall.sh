#!/usr/bin/env bash
# Leave the machine as before Barn (make uninstall). Every step is a Barn
# command that removes only what its manifest, marker or layout proves
# Barn wrote, in the order that keeps each step provable: nodes first (the
# network refuses while a node is attached), then the integrations, then
# the host network, then (on request) the image cache and the state root.
#
#   scripts/uninstall.sh [--purge] [--images] [--yes]
#
#   --purge   also delete persistent disks, the deployment's keys and event
#             log (barn-node destroy --purge) and, once nothing but Barn's
#             lock files is left, the state root and runtime directory
#   --images  also delete the verified image cache (barn-repo purge) and
#             the build cache of `make image` (build-image.sh --remove-cache)
#   --yes     do not ask (scripts); otherwise each destructive step asks
#
#   0. the demo lab, when this user has one (~/.barn-demo, ~/.barn-demo-net),
#      after asking (--yes: without): scripts/demo.sh down (its nodes with
#      their disks and keys, its namespace, its network, what it recorded
#      creating under /etc/netns)
#   1. barn-node destroy [--purge]          every node (QEMU, disks, taps)
#   2. barn-node ssh-config --remove         the Include line, ~/.ssh/barn_config
#                                            (and ~/.ssh, ~/.ssh/config if Barn created them)
#   3. barn-net hosts uninstall              the hosts block, the file as it was
#   4. barn-net uninstall                    the bridge, bridge.conf, the helper's mode,
#                                            the manifest directory when Barn created it
#   5. --images: barn-repo purge, build-image.sh --remove-cache
#   6. --purge:  barn-node purge             the state root, once only lock files are left
#
# Root is needed for the host network and /etc/hosts (sudo is used when
# not root). BARN_HOME, BARN_NET_ETC, BARN_NET_STATE, BARN_NET_RUN and
# BARN_IMAGE_CACHE are honoured. A step that fails never stops the ones
# after it: every step runs, each outcome is listed at the end with
# whatever is left, and the exit status is 1 when any step failed.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bin=$top/bin
purge='' images='' yes=''
for a in "$@"; do
  case "$a" in
    --purge) purge=1 ;; --images) images=1 ;; --yes) yes=1 ;;
    *) echo "uninstall: unknown argument $a" >&2; exit 2 ;;
  esac
done
sudo=; [ "$(id -u)" -eq 0 ] || sudo=sudo
root_env=(env "BARN_NET_ETC=${BARN_NET_ETC:-}" "BARN_NET_STATE=${BARN_NET_STATE:-}" "BARN_NET_RUN=${BARN_NET_RUN:-}")

step() { echo "uninstall: $*" >&2; }

# run WHAT CMD...: one step; its outcome is recorded and the next step
# runs whatever it returned.
outcomes=() failed=()
run() {
  local what=$1 rc=0
  shift
  "$@" || rc=$?
  if [ "$rc" -eq 0 ]; then
    outcomes+=("ok      $what")
  else
    outcomes+=("FAILED  $what (exit $rc; its message is above)")
    failed+=("$what")
  fi
}

# ask QUESTION: yes with --yes; otherwise the terminal answers; without one
# the step is skipped (the Barn commands that ask do so themselves).
ask() {
  [ -n "$yes" ] && return 0
  if { : </dev/tty; } 2>/dev/null; then
    local a
    read -r -p "$1 [y/N] " a </dev/tty
    case $a in [yY]*) return 0 ;; esac
    step "skipped"
    return 1
  fi
  step "skipped: no terminal to ask (make uninstall FORCE=1 does not ask)"
  return 1
}

# 0. The demo lab keeps its own state root, network manifest and namespace;
# demo.sh down removes them (its image cache stays until step 5).
# It destroys a lab, disks included, so it runs only when asked for.
demo_kept=
if [ -e "$HOME/.barn-demo" ] || [ -e "$HOME/.barn-demo-net" ]; then
  if ask "destroy the demo lab in $HOME/.barn-demo (its nodes, disks and keys: scripts/demo.sh down)?"; then
    step "removing the demo lab (scripts/demo.sh down)"
    run "the demo lab (scripts/demo.sh down)" $sudo env HOME="$HOME" ${BARN_DEMO_NS:+BARN_DEMO_NS=$BARN_DEMO_NS} "$top/scripts/demo.sh" down
  else
    demo_kept=1
  fi
fi

home=$("$bin/barn-state" path --jq .root) || { failed+=("finding the state root (barn-state path)"); outcomes+=("FAILED  finding the state root (barn-state path)"); home=; }
if [ -n "$home" ] && { [ -e "$home/state.json" ] || [ -d "$home/nodes" ]; }; then
  if [ -n "$purge" ]; then step "destroying every node (persistent disks and keys are deleted)"
  else step "destroying every node (persistent disks and keys are kept)"; fi
  run "the nodes (barn-node destroy)" "$bin/barn-node" destroy --text ${yes:+--force} ${purge:+--purge}
fi
step "removing the ssh-config integration"
run "the ssh-config integration (barn-node ssh-config --remove)" "$bin/barn-node" ssh-config --remove --text
step "removing the hosts integration"
run "the hosts integration (barn-net hosts uninstall)" $sudo "${root_env[@]}" "$bin/barn-net" hosts uninstall --text ${yes:+--yes}
step "removing the host network"
run "the host network (barn-net uninstall)" $sudo "${root_env[@]}" "$bin/barn-net" uninstall --text ${yes:+--yes}

if [ -n "$images" ]; then
  demo_home=$HOME/.barn-demo
  for h in "$home" "$demo_home"; do
    [ -n "$h" ] && [ -d "$h/images" ] || continue
    if [ "$h" = "$demo_home" ] && [ -n "$demo_kept" ]; then
      step "kept the demo's image cache $h/images (the demo lab, kept, uses it)"
      continue
    fi
    step "the verified image cache $(BARN_HOME=$h "$bin/barn-repo" purge --dry-run --text | tail -n 1)"
    if ask "remove the image cache $h/images?"; then
      run "the image cache $h/images (barn-repo purge)" env BARN_HOME="$h" "$bin/barn-repo" purge --yes --text >/dev/null
      if [ "$h" = "$demo_home" ]; then # the demo's root goes with its cache (demo.sh down purged the rest)
        run "the demo's state root $h (barn-node purge)" env BARN_HOME="$h" BARN_RUNTIME_DIR="/tmp/${BARN_DEMO_NS:-barn-demo}-$(id -u)" "$bin/barn-node" purge --text >&2
      fi
    fi
  done
  if ask "remove the build cache of make image (scripts/build-image.sh --remove-cache)?"; then
    run "the build cache of make image" "$top/scripts/build-image.sh" --remove-cache
    # a build made as root (sudo make image) caches under /var/cache/barn
    if [ -n "$sudo" ] && [ -z "${BARN_IMAGE_CACHE:-}" ] && [ -d /var/cache/barn/images ]; then
      run "root's build cache of make image" sudo "$top/scripts/build-image.sh" --remove-cache
    fi
  fi
fi

if [ -n "$purge" ] && [ -n "$home" ] && [ -e "$home" ]; then
  if [ ! -e "$home/keys" ] && [ ! -e "$home/disks" ] || ask "delete the deployment's keys and retained disks in $home?"; then
    step "purging $home (the state root goes once nothing but Barn's lock files is left)"
    run "the state root $home (barn-node purge)" "$bin/barn-node" purge --text
  fi
fi

if [ -n "$home" ] && [ -e "$home" ]; then
  step "kept $home (barn-node purge says what keeps it; make uninstall PURGE=1 IMAGES=1 removes all of it)"
fi
if [ -n "$demo_kept" ]; then
  step "kept the demo lab in $HOME/.barn-demo (next: make demo-down)"
fi
for o in "${outcomes[@]}"; do step "$o"; done
if [ "${#failed[@]}" -gt 0 ]; then
  step "not done: ${#failed[@]} step(s) failed, and what they remove is still in place:"
  for f in "${failed[@]}"; do step "  - $f"; done
  step "next: fix what each message above names, then run make uninstall again (every step is safe to repeat)"
  exit 1
fi
step "done"
