#!/usr/bin/env bash
# demo.sh — bring up (and tear down) Barn's demo lab: the 3-node Pigsty
# inventory demo/pigsty-trio.yml as real QEMU guests on 10.10.10.0/24,
# confined to the network namespace barn-demo.
#
#   scripts/demo.sh up            # make demo
#   scripts/demo.sh down          # make demo-down
#   scripts/demo.sh status        # barn-node status --text, inside the namespace
#   scripts/demo.sh ssh [NODE] [-- CMD...]
#
# `up` installs what is missing (root on Debian), builds the tools, builds or
# reuses the cached local image repository (scripts/build-image.sh), creates
# the namespace, installs the host network inside it, trusts and activates the
# local repository, runs
#   barn-inventory resolve -f demo/pigsty-trio.yml | barn-plan | barn-node apply
# publishes the node names in the namespace's own /etc/hosts
#   barn-node hosts | ip netns exec barn-demo barn-net hosts install
# and then proves the lab with Ansible: `ansible all -m ping` given the same
# inventory plus `barn-node ssh-config --ansible`, every host answering on its
# inventory address. Re-running `up` on a running lab converges (plan: none).
# Progress goes to stderr; the summary and `barn-node status --text` to stdout.
#
# Why everything is confined, and where it lives:
#   * Guests on private addresses may only live inside a namespace this
#     project creates, and other labs (the e2e suite, a user's own lab) may
#     run on this machine at the same time. So the bridge, the taps, QEMU,
#     SSH and Ansible all run under `ip netns exec barn-demo`.
#   * barn-net writes the QEMU bridge ACL /etc/qemu/bridge.conf, which
#     qemu-bridge-helper reads from that fixed path. `ip netns exec NS`
#     bind-mounts every entry of /etc/netns/NS/ over /etc/, so we create
#     /etc/netns/barn-demo/qemu/ and the ACL barn-net writes there is the
#     namespace's own; the host's /etc/qemu is never written. The bind mount
#     needs the mount point /etc/qemu on the host: when it is missing we
#     create it (empty) and remove it again on `down` if we created it, it is
#     still empty and no other namespace (/etc/netns/*/qemu) still uses it.
#   * The node names go to the namespace's own hosts file: `ip netns exec`
#     bind-mounts /etc/netns/barn-demo/hosts over /etc/hosts, so we create it
#     (a copy of the host's /etc/hosts) before barn-net writes its block
#     there; without it barn-net refuses (the file would be the host's).
#   * barn-net's manifests go to BARN_NET_STATE=$HOME/.barn-demo-net/netstate
#     instead of the host-global /var/lib/barn/network.json, so this lab's
#     network transaction can never be confused with another one.
#   * The lab's state root is BARN_HOME=$HOME/.barn-demo and its sockets and
#     pidfiles are in BARN_RUNTIME_DIR=/tmp/<namespace>-<uid>: a user's own
#     ~/.barn lab (and its runtime directory) is never touched.
#   * The only host-wide change is the one barn-net records in its manifest:
#     the setuid bit on qemu-bridge-helper, restored by `barn-net uninstall`.
# `down` destroys the lab (barn-node destroy --force --purge), removes the
# hosts block and uninstalls the network inside the namespace (recreating an
# empty one when it is gone, so what barn-net recorded there is undone where
# it was made), deletes the namespace, then removes what `up` recorded
# creating in ~/.barn-demo-net/created: the hosts file only while its sha256
# is the one recorded (barn-net hosts uninstall restores it byte for byte),
# the directories under /etc/netns only when empty. Anything else there is
# kept and listed. The verified image cache (~/.barn-demo/images,
# /var/cache/barn/images) stays.
#
# Environment: BARN_ACCEL (default tcg: an explicit, printed opt-in to
# software emulation; kvm on a host where KVM works), BARN_DEMO_INVENTORY
# (default demo/pigsty-trio.yml), BARN_DEMO_WAIT (seconds the Ansible proof
# waits for guests whose first boot outlasted barn-node's readiness window on
# a busy TCG machine; default 600), BARN_DEMO_NS (the namespace; default
# barn-demo, tests use their own).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
bin=$top/bin
NS=${BARN_DEMO_NS:-barn-demo}
inventory=${BARN_DEMO_INVENTORY:-$top/demo/pigsty-trio.yml}
export BARN_HOME=$HOME/.barn-demo
net_dir=$HOME/.barn-demo-net
export BARN_NET_STATE=$net_dir/netstate
BARN_RUNTIME_DIR=/tmp/$NS-$(id -u)
export BARN_RUNTIME_DIR
marker=$net_dir/created-etc-qemu   # we created the host's /etc/qemu mount point
created=$net_dir/created           # what up created under /etc/netns: "dir PATH" or "file SHA256 PATH"
hosts_file=$net_dir/ansible-hosts.yml

t0=$(date +%s)
log() { printf 'demo [%3ds]: %s\n' "$(( $(date +%s) - t0 ))" "$*" >&2; }
die() { printf 'demo: error: %s\n' "$*" >&2; exit 1; }
inns() { ip netns exec "$NS" "$@"; }
have_ns() { ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$NS"; }
# The command a user types to reach a node (the lab's own env, in the namespace).
reach() { printf 'BARN_HOME=%s BARN_RUNTIME_DIR=%s ip netns exec %s %s/barn-node ssh %s' \
  "$BARN_HOME" "$BARN_RUNTIME_DIR" "$NS" "${bin#"$PWD"/}" "$1"; }

need_root() {
  [ "$(id -u)" -eq 0 ] || die "the demo needs root (network namespace, bridge, taps); run: sudo make demo"
  command -v ip >/dev/null || die "ip (iproute2) is missing; run: sudo scripts/install-deps.sh"
}

# record LINE appends what the demo created to $created (0600).
record() { (umask 077; printf '%s\n' "$1" >> "$created"); }

# make_dir DIR creates DIR (0755) when missing and records it.
make_dir() {
  [ -d "$1" ] && return
  mkdir -m 0755 "$1"
  record "dir $1"
}

# etc_qemu makes sure `ip netns exec` can bind /etc/netns/$NS/qemu over
# /etc/qemu: the namespace's directory exists, and so does the host mount
# point (created empty, and remembered, only when missing).
etc_qemu() {
  mkdir -p "$net_dir"
  chmod 0700 "$net_dir"
  make_dir /etc/netns
  make_dir "/etc/netns/$NS"
  make_dir "/etc/netns/$NS/qemu"
  if [ ! -d /etc/qemu ]; then
    mkdir -m 0755 /etc/qemu
    : > "$marker"
    log "created the empty mount point /etc/qemu (removed again by demo-down)"
  fi
}

# etc_hosts gives the namespace its own hosts file (a copy of the host's)
# when it has none, so barn-net hosts edits that one and never /etc/hosts.
etc_hosts() {
  local own=/etc/netns/$NS/hosts
  [ -e "$own" ] || [ -L "$own" ] && return
  etc_qemu # the namespace's directory, recorded
  cp /etc/hosts "$own" 2>/dev/null || : > "$own"
  chmod 0644 "$own"
  record "file $(sha256sum < "$own" | cut -c1-64) $own"
  log "created $own (the namespace's own /etc/hosts; demo-down removes it while it is as written)"
}

# remove_created undoes $created in reverse: a file only while it is a
# regular file with the recorded sha256, a directory only when empty
# (rmdir). What stays is logged, kept in $created and returned as 1.
remove_created() {
  [ -f "$created" ] || return 0
  local line kind a b left=() rc=0
  while IFS= read -r line; do
    read -r kind a b <<<"$line"
    case $kind in
      file)
        if [ ! -e "$b" ] && [ ! -L "$b" ]; then continue
        elif [ -L "$b" ] || [ ! -f "$b" ] || [ "$(sha256sum < "$b" | cut -c1-64)" != "$a" ]; then
          log "kept $b: it changed since the demo wrote it (next: diff /etc/hosts $b, remove it yourself)"
        else rm -f -- "$b"; log "removed $b (the demo wrote it)"; continue
        fi ;;
      dir)
        if [ ! -e "$a" ] && [ ! -L "$a" ]; then continue
        elif [ ! -L "$a" ] && [ -d "$a" ] && rmdir -- "$a" 2>/dev/null; then log "removed the directory $a (the demo created it)"; continue
        else log "kept $a: it holds what the demo did not create (next: ls -la $a)"
        fi ;;
      *) log "kept the unreadable line of $created: $line" ;;
    esac
    left=("$line" "${left[@]}") rc=1
  done < <(tac "$created")
  if [ ${#left[@]} -eq 0 ]; then rm -f -- "$created"
  else printf '%s\n' "${left[@]}" > "$created"; fi
  return $rc
}

up() {
  need_root
  log "installing missing host packages (scripts/install-deps.sh)"
  "$here/install-deps.sh"
  log "building the tools (make build)"
  make -s -C "$top" build >&2
  log "building or reusing the local Debian image repository (scripts/build-image.sh)"
  local repo
  repo=$("$here/build-image.sh")
  [ -f "$repo/catalog.pub" ] || die "build-image.sh printed $repo, which has no catalog.pub"
  export BARN_REPO=$repo
  log "image repository: $BARN_REPO"

  # The demo opts in to TCG explicitly: it must run on CI machines without
  # KVM (and on some, /dev/kvm exists but QEMU cannot use it). With working
  # KVM: BARN_ACCEL=kvm make demo.
  export BARN_ACCEL=${BARN_ACCEL:-tcg}
  if [ "$BARN_ACCEL" = tcg ]; then
    log "accelerator: BARN_ACCEL=tcg — explicit software emulation (slow: guests boot in minutes; with working KVM: BARN_ACCEL=kvm make demo)"
  else
    log "accelerator: BARN_ACCEL=$BARN_ACCEL"
  fi
  log "state root: BARN_HOME=$BARN_HOME (your own ~/.barn lab is never touched); runtime: $BARN_RUNTIME_DIR"

  etc_qemu
  if have_ns; then
    log "network namespace $NS exists; reusing it"
  else
    log "creating network namespace $NS"
    ip netns add "$NS"
  fi
  ip -n "$NS" link set lo up

  if inns "$bin/barn-net" preflight >/dev/null 2>&1; then
    log "host network (inside $NS) is installed and usable"
  else
    log "installing the host network inside $NS (barn-net install; manifest in $BARN_NET_STATE)"
    inns "$bin/barn-net" install --yes >/dev/null
    inns "$bin/barn-net" preflight >/dev/null
  fi

  log "trusting and activating the local repository"
  "$bin/barn-repo" trust add "$BARN_REPO/catalog.pub" >/dev/null
  "$bin/barn-repo" update >/dev/null

  log "barn-inventory resolve -f ${inventory#"$top"/} | barn-plan | barn-node apply"
  local plan result
  plan=$net_dir/plan.json result=$net_dir/apply.json
  "$bin/barn-inventory" resolve -f "$inventory" | "$bin/barn-plan" > "$plan" ||
    die "resolve | plan failed (the error is above and in $plan)"
  log "plan: $(summarize_plan "$plan")"
  local rc=0
  inns "$bin/barn-node" apply < "$plan" > "$result" || rc=$?
  if [ $rc -eq 5 ] && only_readiness_timeouts "$result"; then
    # The guests run but their first boot outlasted barn-node's readiness
    # window (TCG on a busy machine); the Ansible step below waits for them.
    log "apply: $(grep -o '"node":"[^"]*"' "$result" | cut -d'"' -f4 | tr '\n' ' ')still booting after barn-node's readiness window; waiting for them below"
  elif [ $rc -ne 0 ]; then
    cat "$result"
    die "barn-node apply failed (exit $rc); inspect: scripts/demo.sh status, and BARN_HOME=$BARN_HOME BARN_RUNTIME_DIR=$BARN_RUNTIME_DIR $bin/barn-node logs NODE"
  fi
  log "apply done"

  log "names: barn-node hosts | barn-net hosts install, in $NS's own /etc/hosts"
  etc_hosts
  "$bin/barn-node" hosts | inns "$bin/barn-net" hosts install --yes >/dev/null
  local control
  control=$("$bin/barn-inventory" resolve -f "$inventory" --jq '.control')
  inns getent hosts "$control" >/dev/null || die "$control does not resolve inside $NS after barn-net hosts install"
  log "names: inside $NS, $control is $(inns getent hosts "$control" | awk '{print $1}')"

  log "ansible: barn-node ssh-config --ansible, then ansible all -m ping inside $NS"
  inns "$bin/barn-node" ssh-config --ansible --inventory "$inventory" --text > "$hosts_file"
  local ping deadline want got
  want=$("$bin/barn-inventory" resolve -f "$inventory" --jq '.nodes[].address' | sort)
  ping=$net_dir/ansible-ping.txt
  deadline=$(( $(date +%s) + ${BARN_DEMO_WAIT:-600} ))
  until ANSIBLE_TRANSFORM_INVALID_GROUP_CHARS=ignore ANSIBLE_PYTHON_INTERPRETER=auto_silent \
      inns ansible all -i "$inventory" -i "$hosts_file" -m ping -o > "$ping" 2>&1; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      cat "$ping" >&2
      die "ansible could not reach every host; inspect: scripts/demo.sh status"
    fi
    log "ansible: not every host answers yet ($(grep -c ' | SUCCESS ' "$ping") of $(echo "$want" | wc -l)); retrying in 15 s"
    sleep 15
  done
  got=$(awk '/ \| SUCCESS /{print $1}' "$ping" | sort)
  [ "$want" = "$got" ] || { cat "$ping" >&2; die "ansible answered for [$got], want [$want]"; }
  log "ansible: every host answered on its inventory address: $(echo $got)"

  summary "$result" "$ping"
}

# only_readiness_timeouts: every failure in a barn.result/v1 file is a
# readiness timeout (the guest runs, its first boot is just slow).
only_readiness_timeouts() {
  python3 -c 'import json,sys; f=json.load(open(sys.argv[1]))["failures"]; sys.exit(0 if f and all(x.get("reason")=="readiness_timeout" for x in f) else 1)' "$1"
}

# summarize_plan prints a barn.plan/v1 file's action and each node's outcome
# (canonical JSON: the top-level "action" is the first key).
summarize_plan() {
  local action outcomes
  action=$(grep -o '"action":"[a-z]*"' "$1" | head -n1 | cut -d'"' -f4)
  outcomes=$(grep -o '"name":"[^"]*","outcome":"[a-z]*"' "$1" | sed 's/"name":"\([^"]*\)","outcome":"\([a-z]*\)"/\1=\2/' | tr '\n' ' ')
  printf '%s (%s)' "$action" "${outcomes% }"
}

summary() {
  local result=$1 ping=$2 elapsed=$(( $(date +%s) - t0 ))
  echo
  echo "Barn demo lab is up in network namespace $NS ($elapsed s, accelerator $BARN_ACCEL)."
  inns "$bin/barn-node" status --jq '.nodes[] | "\(.name)\t\(.address)\t\(.phase)\t\(.image)"' |
    while IFS=$'\t' read -r name addr phase image; do
      local ok=FAIL
      grep -q "^$addr | SUCCESS " "$ping" && ok=ok
      printf '  %-10s %-12s %-8s %-18s ansible ping %s\n' "$name" "$addr" "$phase" "$image" "$ok"
      printf '    reach it:  %s\n' "$(reach "$name")"
    done
  echo "Ansible: ip netns exec $NS ansible all -i ${inventory#"$top"/} -i $hosts_file -m ping"
  echo "Names:   ip netns exec $NS getent hosts $(inns "$bin/barn-node" status --jq '.nodes[0].name')   (the namespace's own /etc/hosts)"
  echo "Tear down: make demo-down (images stay cached)"
  echo
  inns "$bin/barn-node" status --text
}

down() {
  need_root
  [ -x "$bin/barn-node" ] && [ -x "$bin/barn-net" ] || make -s -C "$top" build >&2
  local run=()
  if have_ns; then
    etc_qemu
    run=(ip netns exec "$NS")
  else
    log "network namespace $NS does not exist"
  fi
  if [ -e "$BARN_HOME/state.json" ] || [ -e "$BARN_HOME/nodes" ] || [ -e "$BARN_HOME/disks" ] || [ -e "$BARN_HOME/keys" ]; then
    log "destroying the lab (barn-node destroy --force --purge${run:+, inside $NS})"
    "${run[@]}" "$bin/barn-node" destroy --force --purge >/dev/null
  else
    log "no demo lab under $BARN_HOME"
  fi
  if [ ${#run[@]} -eq 0 ] && { [ -e "$BARN_NET_STATE/hosts.json" ] || [ -e "$BARN_NET_STATE/network.json" ]; }; then
    # What barn-net recorded lives in /etc/netns/$NS (bound by ip netns exec)
    # and in the helper's mode: undo it from inside an empty namespace of the
    # same name, where those paths are the ones recorded.
    log "barn-net recorded changes inside $NS, which is gone; recreating it empty to undo them there"
    ip netns add "$NS"
    etc_qemu
    run=(ip netns exec "$NS")
  fi
  if [ -e "$BARN_NET_STATE/hosts.json" ]; then
    log "removing the node names from $NS's /etc/hosts (barn-net hosts uninstall)"
    "${run[@]}" "$bin/barn-net" hosts uninstall --yes >/dev/null
  fi
  if [ -e "$BARN_NET_STATE/network.json" ]; then
    log "uninstalling the host network inside $NS (barn-net uninstall)"
    "${run[@]}" "$bin/barn-net" uninstall --yes >/dev/null
  fi
  if have_ns; then
    log "deleting network namespace $NS"
    ip netns del "$NS"
  fi
  remove_created || true
  if [ -e "/etc/netns/$NS" ] && ! grep -qx "dir /etc/netns/$NS" "$created" 2>/dev/null; then
    log "kept /etc/netns/$NS: the demo has no record of creating it (next: ls -la /etc/netns/$NS)"
  fi
  if [ -f "$marker" ]; then
    # Namespaces whose /etc/netns/NS/qemu still binds over /etc/qemu: the
    # demo's own is gone by now (its kept directory, e.g. one an older
    # demo made without a record, binds over nothing).
    local binders=() d
    for d in /etc/netns/*/qemu; do
      [ -d "$d" ] && [ "$d" != "/etc/netns/$NS/qemu" ] && binders+=("${d#/etc/netns/}")
    done
    if [ ${#binders[@]} -gt 0 ]; then
      # Keep the marker: the next `make demo-down` removes it.
      log "leaving the empty /etc/qemu the demo created: other namespaces (${binders[*]%/qemu}) still bind over it; run make demo-down again once they are gone"
    elif rmdir /etc/qemu 2>/dev/null || [ ! -e /etc/qemu ]; then
      rm -f "$marker"
      log "removed the mount point /etc/qemu that the demo created"
    else
      rm -f "$marker"
      log "leaving /etc/qemu: it is no longer empty (something else uses it now)"
    fi
  fi
  rm -f "$hosts_file" "$net_dir/plan.json" "$net_dir/apply.json" "$net_dir/ansible-ping.txt"
  rmdir "$BARN_NET_STATE" "$net_dir" 2>/dev/null || true
  [ -d "$BARN_RUNTIME_DIR" ] && { rmdir "$BARN_RUNTIME_DIR"/* 2>/dev/null; rmdir "$BARN_RUNTIME_DIR" 2>/dev/null; } || true
  log "done; the image cache stays ($BARN_HOME/images, /var/cache/barn/images)"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
  up) up ;;
  down) down ;;
  status) need_root; have_ns || die "no demo lab (namespace $NS is missing); run: make demo"
    inns "$bin/barn-node" status --text ;;
  ssh) need_root; have_ns || die "no demo lab (namespace $NS is missing); run: make demo"
    exec ip netns exec "$NS" "$bin/barn-node" ssh "$@" ;;
  *) echo "usage: $0 up|down|status|ssh [NODE] [-- CMD...]" >&2; exit 2 ;;
esac
