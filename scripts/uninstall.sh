#!/usr/bin/env bash
# Leave the machine as before Barn, in the order that keeps every step
# provable: nodes first (the network refuses while a node is attached),
# then the integrations, then the host network, then (on request) the
# state root's keys, persistent disks and image cache.
#
#   scripts/uninstall.sh [--purge] [--images] [--yes]
#
#   --purge   also delete persistent disks and the deployment's keys
#   --images  also delete the verified image cache (BARN_HOME/images)
#   --yes     do not ask (scripts); otherwise each destructive step asks
#
# Root is needed for the host network and /etc/hosts (sudo is used when
# not root). BARN_HOME, BARN_NET_ETC and BARN_NET_STATE are honoured.
set -euo pipefail
bin="$(cd "$(dirname "$0")/.." && pwd)/bin"
purge= images= yes=
for a in "$@"; do
  case "$a" in
    --purge) purge=1 ;; --images) images=1 ;; --yes) yes=1 ;;
    *) echo "uninstall: unknown argument $a" >&2; exit 2 ;;
  esac
done
sudo=; [ "$(id -u)" -eq 0 ] || sudo=sudo
root_env=(env "BARN_NET_ETC=${BARN_NET_ETC:-}" "BARN_NET_STATE=${BARN_NET_STATE:-}")

step() { echo "uninstall: $*" >&2; }

home=$("$bin/barn-state" path --jq .root)
if [ -e "$home/state.json" ] || [ -d "$home/nodes" ]; then
  step "destroying every node (persistent disks and keys ${purge:+are deleted}${purge:-are kept})"
  "$bin/barn-node" destroy --text ${yes:+--force} ${purge:+--purge}
fi
step "removing the ssh-config integration"
"$bin/barn-node" ssh-config --remove --text
step "removing the hosts integration"
$sudo "${root_env[@]}" "$bin/barn-net" hosts uninstall --text ${yes:+--yes}
step "removing the host network"
$sudo "${root_env[@]}" "$bin/barn-net" uninstall --text ${yes:+--yes}
if [ -n "$images" ] && [ -d "$home/images" ]; then
  step "removing the image cache $home/images"
  rm -rf -- "$home/images"
fi
if [ -n "$purge" ] && [ -n "$images" ] && [ -d "$home" ]; then
  # what a purged deployment leaves is Barn's own bookkeeping: the event
  # log and lock files; the state root goes when nothing else is in it
  left=$(find "$home" -mindepth 1 -maxdepth 1 ! -name events.jsonl ! -name locks | head -1)
  if [ -z "$left" ]; then
    step "removing the empty state root $home"
    rm -rf -- "$home"
  else
    step "keeping $home: it still holds $left"
  fi
fi
step "done"
