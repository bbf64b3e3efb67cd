#!/usr/bin/env bash
# bench-resize.sh — the time to apply a memory increase to a running node
# with hot-plug (`barn-node resize`) versus the recreate it replaces
# (`barn-node recreate`: a new root disk and a boot to ready), side by side
# in one run on this machine, one UEFI d12 node under TCG in a private
# network namespace (as testscripts/lab_test.go). Needs root, QEMU and the
# image (BARN_BENCH_REPO, default scripts/build-image.sh).
#
# Each hot-plug sample adds 128 MiB (one memory block) to the running
# guest and is timed twice: the command alone, and until the guest's
# MemTotal shows it (the udev rule onlined it). Each recreate sample
# recreates the node with 128 MiB more and is timed until it is ready.
#
# Environment: BENCH_COUNT=N samples of each (default 3), RECREATES=N
# recreate samples (default BENCH_COUNT: each is a TCG boot); medians.
# Prints a Markdown section on stdout; progress on stderr.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
count=${BENCH_COUNT:-3}
recreates=${RECREATES:-$count}
log() { printf 'bench-resize: %s\n' "$*" >&2; }
now_ns() { date +%s%N; }
median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
[ "$(id -u)" = 0 ] || { log "needs root (a network namespace)"; exit 3; }
repo=${BARN_BENCH_REPO:-$("$root/scripts/build-image.sh")}
export PATH="$root/bin:$PATH"
work=$(mktemp -d /tmp/barn-bench-resize.XXXXXX)
ns="barn-bench-rs-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')"
rt=$(mktemp -d /tmp/barn-bench-rsrt.XXXXXX)
etc_qemu_created=0
cleanup() {
	ip netns exec "$ns" barn-node destroy --force --purge >/dev/null 2>&1 || true
	ip netns exec "$ns" barn-net uninstall --yes >/dev/null 2>&1 || true
	ip netns del "$ns" 2>/dev/null || true
	rm -rf "/etc/netns/$ns"; rmdir /etc/netns 2>/dev/null || true
	[ "$etc_qemu_created" = 1 ] && rmdir /etc/qemu 2>/dev/null || true
	rm -rf "$rt" "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ip netns add "$ns"
ip -n "$ns" link set lo up
if [ ! -e /etc/qemu ]; then mkdir /etc/qemu; etc_qemu_created=1; fi
mkdir -p "/etc/netns/$ns/qemu" "$work/home"
export BARN_HOME="$work/.barn" BARN_NET_STATE="$work/netstate" BARN_REPO="$repo" BARN_ACCEL=tcg \
	BARN_RUNTIME_DIR="$rt" HOME="$work/home"
inns() { ip netns exec "$ns" "$@"; }
inv() { # inv MEM_MIB: the one-node inventory with that much memory
	sed "s/@MEM@/$1/" <<-'YAML' >"$work/solo.yml"
	all:
	  children:
	    infra:
	      hosts:
	        10.10.10.10: {nodename: solo, infra_seq: 1, vm_cpu: 1, vm_mem: @MEM@, vm_disk: 8GiB}
	  vars: {admin_ip: 10.10.10.10}
	YAML
	barn-inventory resolve -f "$work/solo.yml" | barn-plan >"$work/plan.json"
}
memtotal() { inns barn-node exec solo -- awk '/^MemTotal:/{print $2}' /proc/meminfo; }
inns barn-net install --yes >/dev/null
barn-repo trust add "$repo/catalog.pub" >/dev/null
barn-repo update >/dev/null
mem=1024
inv $mem
log "creating the node (TCG boot)"
inns barn-node apply <"$work/plan.json" >/dev/null
: >"$work/hot-cmd" >"$work/hot-guest" >"$work/recreate"
for i in $(seq "$count"); do
	before=$(memtotal)
	mem=$((mem + 128)); inv $mem
	t0=$(now_ns)
	inns barn-node resize solo --force <"$work/plan.json" >"$work/resize.json"
	t1=$(now_ns)
	grep -q '"action":"hotplugged"' "$work/resize.json" || { log "sample $i was not hot-plugged"; cat "$work/resize.json" >&2; exit 1; }
	inns barn-node exec solo -- timeout 60 sh -c "until [ \$(awk '/^MemTotal:/{print \$2}' /proc/meminfo) -gt $before ]; do sleep 0.05; done"
	t2=$(now_ns)
	echo "$(( (t1 - t0) / 1000000 ))" >>"$work/hot-cmd"
	echo "$(( (t2 - t0) / 1000000 ))" >>"$work/hot-guest"
	log "hot-plug $i: command $(( (t1 - t0) / 1000000 )) ms, guest sees it after $(( (t2 - t0) / 1000000 )) ms"
done
for i in $(seq "$recreates"); do
	mem=$((mem + 128)); inv $mem
	t0=$(now_ns)
	inns barn-node recreate solo --force <"$work/plan.json" >"$work/recreate.json"
	t1=$(now_ns)
	grep -q '"ready":true' "$work/recreate.json" || { log "recreate $i: not ready"; exit 1; }
	echo "$(( (t1 - t0) / 1000000 ))" >>"$work/recreate"
	log "recreate $i: ready after $(( (t1 - t0) / 1000000 )) ms"
done
hc=$(median <"$work/hot-cmd") hg=$(median <"$work/hot-guest") rc=$(median <"$work/recreate")
ratio=$(awk -v r="$rc" -v h="$hg" 'BEGIN {printf "%.0f", r / h}')
cat <<EOF
## Resize: memory hot-plug vs the recreate it replaces

Measured by \`scripts/bench-resize.sh\` on $(date -u '+%Y-%m-%d %H:%M') UTC
(revision \`$(git -C "$root" rev-parse --short HEAD)\`, load average
$(cut -d' ' -f1-3 /proc/loadavg) at the end), one UEFI d12 node with 1 vCPU
under TCG, $count hot-plug and $recreates recreate samples, medians. Each sample adds 128 MiB of
memory to the running node.

| apply a memory increase | median | samples (ms) |
| --- | --- | --- |
| hot-plug, \`barn-node resize\` command | $hc ms | $(paste -sd' ' "$work/hot-cmd") |
| hot-plug, until the guest's MemTotal shows it | $hg ms | $(paste -sd' ' "$work/hot-guest") |
| \`barn-node recreate\`, until the node is ready | $rc ms | $(paste -sd' ' "$work/recreate") |

Hot-plug applies the increase **${ratio}×** faster than the recreate it
replaces (guest-visible time against time to ready), and keeps the root
disk and whatever was installed on it. Under KVM the boot is faster, so
the ratio would be smaller; the hot-plug time is QMP round trips and the
guest's udev, independent of the accelerator.
EOF
