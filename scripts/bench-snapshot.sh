#!/usr/bin/env bash
# bench-snapshot.sh — restoring a running 3-node lab to a snapshot vs
# recreating and booting the same lab, side by side in one run (issue 22:
# restore < 10 s and >= 20x faster). Needs root, qemu-system-x86_64 and the
# image repository (BARN_BENCH_REPO, default: scripts/build-image.sh).
#
# The lab is booted as testscripts/lab_test.go boots it: a fresh network
# namespace, /etc/netns/NS/qemu, `barn-net install` inside it, BARN_HOME
# and BARN_NET_STATE in a temporary directory, BARN_ACCEL=tcg. Then:
#   create   `barn-node apply` of 3 nodes until all are ready (once)
#   save     `barn-node snapshot save base` of the running lab (once)
#   restore  `barn-node snapshot restore base --force`, RESTORES times
#            (default 5), median; after the last, every guest's boot ID is
#            the one read before the save (resumed, not rebooted)
#   recreate `barn-node recreate --force` of the whole lab until all are
#            ready again (once: a TCG boot takes minutes)
# The ratio is the recreate time over the median restore.
#
# Output: a Markdown section (between <!-- snapshot:begin --> and
# <!-- snapshot:end -->) on stdout, progress on stderr. With --write FILE
# the section replaces the one in FILE (or is appended to it).
# Exit status: 0 when measured (targets met or not), 1 when it could not run.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
write=""
if [ "${1:-}" = --write ]; then write=${2:?--write FILE}; fi
restores=${RESTORES:-5}
log() { printf 'bench-snapshot: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
now_ns() { date +%s%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", (b - a) / 1e9}'; }
median() {
	sort -g | awk '{v[NR] = $1} END {if (NR == 0) {print "NaN"; exit}
		print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

[ "$(id -u)" = 0 ] || die "needs root (a network namespace)"
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 is not installed"
export PATH="$root/bin:$PATH"
for t in barn-inventory barn-plan barn-node barn-net barn-repo; do
	command -v "$t" >/dev/null || die "$t is not built (make build)"
done
repo=${BARN_BENCH_REPO:-$("$root/scripts/build-image.sh")}

work=$(mktemp -d /tmp/barn-bench-snap.XXXXXX)
ns="barn-bench-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')"
rt=$(mktemp -d /tmp/barn-bsnap-rt.XXXXXX)
home="$work/.barn"
etc_qemu_created=0
cleanup() {
	ip netns exec "$ns" barn-node destroy --force --purge >/dev/null 2>&1 || true
	ip netns exec "$ns" barn-net uninstall --yes >/dev/null 2>&1 || true
	local p cmd pid
	for p in /proc/[0-9]*/cmdline; do # only QEMUs of this lab, if destroy failed
		cmd=$(tr '\0' ' ' <"$p" 2>/dev/null) || continue
		case $cmd in *qemu*"$home"* | *qemu*"$rt"*) pid=${p#/proc/}; kill -9 "${pid%/cmdline}" 2>/dev/null || true ;; esac
	done
	ip netns del "$ns" 2>/dev/null || true
	rm -rf "/etc/netns/$ns" "$rt" "$work"
	rmdir /etc/netns 2>/dev/null || true
	if [ "$etc_qemu_created" = 1 ]; then rmdir /etc/qemu 2>/dev/null || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$ns"
ip -n "$ns" link set lo up
if [ ! -e /etc/qemu ]; then mkdir /etc/qemu; etc_qemu_created=1; fi
mkdir -p "/etc/netns/$ns/qemu" "$work/home"
# A loaded 2-core host boots a TCG guest in 3-10+ minutes: the readiness
# wait is the lab suite's (testscripts/lab_test.go), unless one is given.
export BARN_HOME="$home" BARN_NET_STATE="$work/netstate" BARN_REPO="$repo" BARN_ACCEL=tcg \
	BARN_RUNTIME_DIR="$rt" HOME="$work/home" BARN_READY_TIMEOUT="${BARN_READY_TIMEOUT:-25m}"
inns() { ip netns exec "$ns" "$@"; }
cat >"$work/three.yml" <<'YAML'
all:
  children:
    infra:
      hosts:
        10.10.10.10: {nodename: meta, infra_seq: 1}
    pg-test:
      hosts:
        10.10.10.11: {pg_seq: 1, pg_role: primary}
        10.10.10.12: {pg_seq: 2, pg_role: replica}
      vars:
        pg_cluster: pg-test
  vars:
    admin_ip: 10.10.10.10
    vm_cpu: 1
    vm_mem: 768
    vm_disk: 8GiB
    vm_disks:
      - {path: /data, size: 1, persistent: true}
YAML
nodes="meta pg-test-1 pg-test-2"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u '+%Y-%m-%d %H:%M UTC')
inns barn-net install --yes >/dev/null 2>"$work/err" || die "barn-net install: $(tail -1 "$work/err")"
{ barn-repo trust add "$repo/catalog.pub" && barn-repo update; } >/dev/null 2>"$work/err" || die "barn-repo: $(tail -1 "$work/err")"
plan() { barn-inventory resolve -f "$work/three.yml" | barn-plan; }
plan >"$work/plan.json" 2>"$work/err" || die "resolve | plan: $(tail -1 "$work/err")"

# all_ready FILE: every node of the result in FILE is ready.
all_ready() { [ "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sum(1 for n in d["nodes"] if n.get("ready")))' "$1")" = 3 ]; }
boot_ids() { for n in $nodes; do inns barn-node exec "$n" -- cat /proc/sys/kernel/random/boot_id; done; }

log "create: barn-node apply, 3 nodes, until ready (TCG: minutes)"
t0=$(now_ns)
inns barn-node apply <"$work/plan.json" >"$work/apply.json" 2>"$work/err" || die "apply: $(grep error: "$work/err" | tail -1)"
t1=$(now_ns)
all_ready "$work/apply.json" || die "apply returned without every node ready"
create_s=$(secs "$t0" "$t1")
boot_ids >"$work/boot.before"

log "save: barn-node snapshot save base"
t0=$(now_ns)
inns barn-node snapshot save base >"$work/save.json" 2>"$work/err" || die "snapshot save: $(tail -1 "$work/err")"
t1=$(now_ns)
save_s=$(secs "$t0" "$t1")
size_mib=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["snapshot"]["size_bytes"] >> 20)' "$work/save.json")

log "restore: barn-node snapshot restore base --force, $restores times"
: >"$work/restores"
for _ in $(seq "$restores"); do
	t0=$(now_ns)
	inns barn-node snapshot restore base --force >/dev/null 2>"$work/err" || die "snapshot restore: $(tail -1 "$work/err")"
	t1=$(now_ns)
	secs "$t0" "$t1" >>"$work/restores"
	echo >>"$work/restores"
done
restore_s=$(median <"$work/restores")
restore_all=$(tr '\n' ' ' <"$work/restores" | sed 's/  */ /g; s/ $//')
boot_ids >"$work/boot.after"
cmp -s "$work/boot.before" "$work/boot.after" || die "a guest's boot ID changed across the restores"
# Said now, so a recreate that fails (a TCG boot on a loaded host can
# exceed the readiness limit) still leaves the restore figures.
log "create $create_s s; save $save_s s ($size_mib MiB); restore median $restore_s s ($restore_all)"

log "recreate: barn-node recreate --force, the whole lab, until ready"
plan >"$work/plan2.json" 2>"$work/err" || die "resolve | plan: $(tail -1 "$work/err")"
t0=$(now_ns)
inns barn-node recreate --force <"$work/plan2.json" >"$work/recreate.json" 2>"$work/err" || die "recreate: $(grep error: "$work/err" | tail -1)"
t1=$(now_ns)
all_ready "$work/recreate.json" || die "recreate returned without every node ready"
recreate_s=$(secs "$t0" "$t1")
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

ratio=$(awk -v a="$recreate_s" -v b="$restore_s" 'BEGIN {printf "%.0f", a / b}')
fast=$(awk -v v="$restore_s" 'BEGIN {print (v < 10) ? "met" : "**not met**"}')
enough=$(awk -v v="$ratio" 'BEGIN {print (v >= 20) ? "met" : "**not met**"}')
log "restore median $restore_s s ($restore_all); recreate $recreate_s s; ${ratio}x"

section=$(cat <<EOF
<!-- snapshot:begin (scripts/bench-snapshot.sh) -->
## Snapshot restore vs recreate, 3-node lab

Measured by \`scripts/bench-snapshot.sh\` (\`make bench\` runs it with the
lab) on $started, load average $load_start at the start, $load_end at the
end. Three nodes (\`meta\`, \`pg-test-1\`, \`pg-test-2\`; 1 vCPU, 768 MiB, a
1 GiB persistent data disk each; d12, UEFI) under TCG, booted as the lab
suite boots them. Every figure is wall time of the whole command.

| item | Barn | peer, same run | ratio | target | verdict |
| --- | --- | --- | --- | --- | --- |
| restore a running 3-node lab to a snapshot | $restore_s s (\`snapshot restore base --force\`, median of $restores: $restore_all) | $recreate_s s (\`recreate --force\` of the same lab until every node is ready) | ${ratio}× faster | < 10 s and ≥ 20× | $fast; $enough |
| save a running 3-node lab | $save_s s (\`snapshot save base\`, once; $size_mib MiB of vmstate and copies) | — | — | reported | report |
| create the 3-node lab | $create_s s (\`apply\` until every node is ready, once) | — | — | reported | report (TCG) |

After the restores every guest's boot ID is still the one read before the
save: the guests were resumed, not rebooted. A restore pauses every node
(QMP \`stop\`), loads each node's vmstate and disk tags with QEMU's
\`snapshot-load\` job (all nodes at once: each job runs in its own QEMU),
then resumes them all; its time is dominated by reading the slowest
node's vmstate back from its root overlay. Recreate and create are one
measurement each (a TCG boot of three guests on two cores takes minutes).
<!-- snapshot:end -->
EOF
)
if [ -n "$write" ]; then
	tmp="$write.tmp.$$"
	if grep -q '^<!-- snapshot:begin' "$write" 2>/dev/null; then
		S="$section" awk '/^<!-- snapshot:begin/ {print ENVIRON["S"]; skip = 1} !skip {print} /^<!-- snapshot:end/ {skip = 0}' "$write" >"$tmp"
	else
		{ cat "$write" 2>/dev/null; echo; echo "$section"; } >"$tmp"
	fi
	mv "$tmp" "$write"
	log "wrote $write"
fi
echo "$section"
